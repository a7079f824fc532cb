/*
 * Watching configuration files for changes (inotify), for a daemon that
 * applies nodepool.yaml and secure.conf whenever they change, without a
 * signal, as Nodepool's launcher does (config.py checkRecentConfig, which
 * compares the files' mtimes once a second).
 *
 * What is watched: the directory of each file (not the file), so that
 * every way of changing it is seen: a rewrite in place, an editor's
 * write-to-temp + rename, a configuration tool's symlink swap, and a
 * Kubernetes ConfigMap update (the directory symlink `..data` swapped by a
 * rename). Each symlink on the way to the file (the file itself, or a
 * directory in its path) adds a watch on the directory holding it, and the
 * directory the file finally resolves to is watched too; the set is
 * recomputed after every change (a symlink may now point elsewhere). Only
 * events that name one of those entries count: other files in the same
 * directories (logs, pid files) do not wake the watcher. A slow poll
 * (CFGWATCH_POLL seconds) backs inotify up where it cannot see a change
 * (a network file system, a watch that could not be added).
 *
 * What is reported: after a burst of events has been quiet for
 * CFGWATCH_QUIET seconds (at most CFGWATCH_MAX_WAIT after its first event,
 * or, while a file modified in place is still open for writing, until it
 * is closed, at most CFGWATCH_WRITE_WAIT), every file is read whole (and
 * read again later if it changed during the read). When the contents (or
 * the error of a file that cannot be read) differ from the last ones
 * reported or marked seen, the callback gets them. Unchanged contents
 * (touch, the same bytes rewritten) report nothing, and contents are
 * reported once: broken contents are not reported again until they
 * change. Better than upstream, which reloads on any mtime change and may
 * read a file half written.
 *
 * Single-threaded, on the caller's libevent base. Linux only (inotify).
 */
#ifndef NP_CFGWATCH_H
#define NP_CFGWATCH_H

#include <stddef.h>

struct event_base;
struct np_config;
struct np_cfg_errors;

/* Seconds of quiet after the last event before the files are read. */
#define CFGWATCH_QUIET 0.2
/* Seconds from a burst's first event after which the files are read even
 * if events keep coming. */
#define CFGWATCH_MAX_WAIT 1.0
/* Seconds a burst is waited for while a file is still open for writing
 * (modified, not closed): a slow writer's file is not read half written. */
#define CFGWATCH_WRITE_WAIT 10.0
/* Seconds between two reads when no event came (the backstop). */
#define CFGWATCH_POLL 10.0
/* Largest file read (bytes); a larger one is reported with err EFBIG. */
#define CFGWATCH_MAX_FILE (32u << 20)

/* One file as read at one moment. */
struct cfgwatch_file {
	char *path; /* as given to the reader (owned) */
	char *data; /* the whole contents plus a NUL (owned); NULL when err */
	size_t len; /* bytes in data, without the NUL */
	int err;    /* 0, or the errno of opening or reading it */
};

/* Every watched file, read one after the other. Contents are compared
 * byte for byte (cfgwatch_snapshot_equal), not by a digest: a config is
 * small, and the supervisor then needs no hash library (OpenSSL). */
struct cfgwatch_snapshot {
	struct cfgwatch_file *files; /* n entries, in the order of the paths (owned) */
	size_t n;
};

/*
 * Read paths[0..n-1] into *snap (cleared first by the caller or zeroed).
 * Never fails as a whole: a file that cannot be read has err set. Returns
 * the number of such files. Free with cfgwatch_snapshot_clear.
 */
size_t cfgwatch_snapshot_read(const char *const *paths, size_t n, struct cfgwatch_snapshot *snap);
void cfgwatch_snapshot_clear(struct cfgwatch_snapshot *snap);
/* Deep copy of src into dst (dst zeroed or cleared first). */
void cfgwatch_snapshot_copy(struct cfgwatch_snapshot *dst, const struct cfgwatch_snapshot *src);
/* 1 when a and b have the same contents: as many files, each with the
 * same error and the same bytes (paths are not compared); else 0. */
int cfgwatch_snapshot_equal(const struct cfgwatch_snapshot *a, const struct cfgwatch_snapshot *b);

/*
 * Load a snapshot of nodepool.yaml (files[0]) and, when n > 1, secure.conf
 * (files[1]), as np_cfg_load does from the files: 0 with *cfg, or -1
 * with every error in *errs (a file that could not be read is one error
 * "path: cannot read: <strerror>"). Positions name the paths of the
 * snapshot.
 */
int cfgwatch_load_config(const struct cfgwatch_snapshot *snap, struct np_config **cfg,
			 struct np_cfg_errors **errs);

/* Called with the new contents (valid during the call only); they count
 * as seen whatever the callback makes of them. */
typedef void (*cfgwatch_cb)(const struct cfgwatch_snapshot *snap, void *arg);

struct cfgwatch;

/*
 * Watch paths[0..n-1] (absolute paths; copied) on base. in_force, when not
 * NULL, is the snapshot whose contents the caller runs (copied); NULL: the
 * first contents read are reported. The files
 * are checked once right away, so a change between the caller's read and
 * the watch is not lost. Returns NULL with a message in err when inotify
 * is not available (the caller then reloads on signals only).
 */
struct cfgwatch *cfgwatch_new(struct event_base *base, const char *const *paths, size_t n,
			      const struct cfgwatch_snapshot *in_force, cfgwatch_cb cb, void *arg,
			      char *err, size_t errlen);
/* The caller read and applied (or rejected) snap itself (SIGHUP): do not
 * report these contents again. */
void cfgwatch_seen(struct cfgwatch *w, const struct cfgwatch_snapshot *snap);
/* Stop watching; NULL is a no-op. May be called from the callback. */
void cfgwatch_free(struct cfgwatch *w);

#endif
