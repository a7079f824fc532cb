/*
 * Configuration files watched with inotify: see cfgwatch.h.
 */
#include "lib/config/cfgwatch.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "lib/config/config.h"
#include "lib/core/log.h"
#include "lib/core/xalloc.h"
#include "lib/core/clock.h"

/* What changes a directory entry, or the directory itself. */
#define CW_MASK                                                                                    \
	(IN_CLOSE_WRITE | IN_MODIFY | IN_ATTRIB | IN_CREATE | IN_DELETE | IN_MOVED_FROM |          \
	 IN_MOVED_TO | IN_DELETE_SELF | IN_MOVE_SELF)
/* Symlinks followed at most (as the kernel's ELOOP limit). */
#define CW_MAX_HOPS 40

/* One watched entry: name in dir, dir watched as wd (-1: could not be). */
struct cw_ent {
	int wd;
	char *dir;
	char *name;
	bool writing; /* modified and not closed since: a writer has it open */
};

struct cfgwatch {
	struct event_base *base;
	char **paths;
	size_t n;
	int fd;
	struct event *ev_in, *ev_timer, *ev_poll;
	struct cw_ent *ents;
	size_t nents;
	struct cfgwatch_snapshot seen; /* the contents last reported or marked seen */
	bool have_seen;
	double first_event; /* monotonic; 0 when no burst is pending */
	cfgwatch_cb cb;
	void *arg;
};

/* ---- reading ----------------------------------------------------------------- */

static void
read_one(const char *path, struct cfgwatch_file *f)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	size_t cap = 0;

	memset(f, 0, sizeof(*f));
	f->path = xstrdup(path);
	if (fd < 0) {
		f->err = errno;
		return;
	}
	if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
		f->err = EISDIR;
		close(fd);
		return;
	}
	for (;;) {
		ssize_t r;

		if (f->len + 1 >= cap) {
			if (cap > CFGWATCH_MAX_FILE) {
				f->err = EFBIG;
				break;
			}
			cap = cap ? cap * 2 : 16384;
			if ((f->data = realloc(f->data, cap)) == NULL)
				np_oom();
		}
		r = read(fd, f->data + f->len, cap - f->len - 1);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			f->err = errno;
			break;
		}
		if (r == 0)
			break;
		f->len += (size_t)r;
	}
	close(fd);
	if (f->err != 0) {
		free(f->data);
		f->data = NULL;
		f->len = 0;
		return;
	}
	if (f->data == NULL && (f->data = malloc(1)) == NULL)
		np_oom();
	f->data[f->len] = '\0';
}

size_t
cfgwatch_snapshot_read(const char *const *paths, size_t n, struct cfgwatch_snapshot *snap)
{
	size_t i, bad = 0;

	if ((snap->files = calloc(n ? n : 1, sizeof(*snap->files))) == NULL)
		np_oom();
	snap->n = n;
	for (i = 0; i < n; i++) {
		read_one(paths[i], &snap->files[i]);
		bad += snap->files[i].err != 0;
	}
	return bad;
}

void
cfgwatch_snapshot_copy(struct cfgwatch_snapshot *dst, const struct cfgwatch_snapshot *src)
{
	size_t i;

	if ((dst->files = calloc(src->n ? src->n : 1, sizeof(*dst->files))) == NULL)
		np_oom();
	dst->n = src->n;
	for (i = 0; i < src->n; i++) {
		const struct cfgwatch_file *f = &src->files[i];
		struct cfgwatch_file *g = &dst->files[i];

		g->path = f->path != NULL ? xstrdup(f->path) : NULL;
		g->err = f->err;
		g->len = f->len;
		if (f->data != NULL) {
			if ((g->data = malloc(f->len + 1)) == NULL)
				np_oom();
			memcpy(g->data, f->data, f->len + 1);
		}
	}
}

int
cfgwatch_snapshot_equal(const struct cfgwatch_snapshot *a, const struct cfgwatch_snapshot *b)
{
	size_t i;

	if (a->n != b->n)
		return 0;
	for (i = 0; i < a->n; i++) {
		const struct cfgwatch_file *f = &a->files[i], *g = &b->files[i];

		if (f->err != g->err || f->len != g->len ||
		    (f->len > 0 && memcmp(f->data, g->data, f->len) != 0))
			return 0;
	}
	return 1;
}

void
cfgwatch_snapshot_clear(struct cfgwatch_snapshot *snap)
{
	size_t i;

	for (i = 0; i < snap->n; i++) {
		free(snap->files[i].path);
		free(snap->files[i].data);
	}
	free(snap->files);
	memset(snap, 0, sizeof(*snap));
}

int
cfgwatch_load_config(const struct cfgwatch_snapshot *snap, struct np_config **cfg,
		     struct np_cfg_errors **errs)
{
	struct np_cfg_errors *e = np_cfg_errors_new();
	const struct cfgwatch_file *main_f, *sec;
	size_t i;

	for (i = 0; i < snap->n && i < 2; i++)
		if (snap->files[i].err != 0)
			np_cfg_errors_add(e, snap->files[i].path, 0, 0, "", "cannot open: %s",
					  strerror(snap->files[i].err));
	if (snap->n == 0)
		np_cfg_errors_add(e, "<config>", 0, 0, "", "no configuration file");
	if (np_cfg_errors_count(e) > 0) {
		*cfg = NULL;
		*errs = e;
		return -1;
	}
	np_cfg_errors_free(e);
	main_f = &snap->files[0];
	sec = snap->n > 1 ? &snap->files[1] : NULL;
	return np_cfg_load_buffer(main_f->path, main_f->data, main_f->len, sec ? sec->path : NULL,
				  sec ? sec->data : NULL, sec ? sec->len : 0, cfg, errs);
}

/* ---- the watch set --------------------------------------------------------------- */

static void
ent_add(struct cw_ent **v, size_t *n, const char *dir, size_t dirlen, const char *name)
{
	size_t i;

	if (dirlen == 0)
		dir = "/", dirlen = 1;
	for (i = 0; i < *n; i++)
		if (strlen((*v)[i].dir) == dirlen && strncmp((*v)[i].dir, dir, dirlen) == 0 &&
		    strcmp((*v)[i].name, name) == 0)
			return;
	if ((*v = realloc(*v, (*n + 1) * sizeof(**v))) == NULL)
		np_oom();
	(*v)[*n].wd = -1;
	(*v)[*n].writing = false;
	if (((*v)[*n].dir = strndup(dir, dirlen)) == NULL)
		np_oom();
	(*v)[*n].name = xstrdup(name);
	(*n)++;
}

/* p's entry in its directory, and the entry of every directory symlink on
 * the way to it (a swapped `..data` is a rename in its parent). */
static void
ent_add_path(struct cw_ent **v, size_t *n, const char *p)
{
	const char *slash = strrchr(p, '/'), *s;
	char prefix[PATH_MAX];
	struct stat st;

	if (slash == NULL)
		return;
	for (s = strchr(p + 1, '/'); s != NULL && s <= slash; s = strchr(s + 1, '/')) {
		size_t len = (size_t)(s - p);
		const char *last;

		if (len >= sizeof(prefix))
			break;
		memcpy(prefix, p, len);
		prefix[len] = '\0';
		if (lstat(prefix, &st) == 0 && S_ISLNK(st.st_mode)) {
			last = strrchr(prefix, '/');
			ent_add(v, n, prefix, (size_t)(last - prefix), last + 1);
		}
	}
	ent_add(v, n, p, (size_t)(slash - p), slash + 1);
}

/* Every entry whose change may change what path reads. */
static void
ent_add_chain(struct cw_ent **v, size_t *n, const char *path)
{
	char p[PATH_MAX], link[PATH_MAX], next[PATH_MAX];
	struct stat st;
	int hops;
	ssize_t r;

	snprintf(p, sizeof(p), "%s", path);
	for (hops = 0; hops < CW_MAX_HOPS; hops++) {
		ent_add_path(v, n, p);
		if (lstat(p, &st) != 0 || !S_ISLNK(st.st_mode))
			break;
		if ((r = readlink(p, link, sizeof(link) - 1)) <= 0)
			break;
		link[r] = '\0';
		if (link[0] == '/') {
			memcpy(p, link, (size_t)r + 1);
		} else {
			/* relative to the directory holding the link */
			size_t dl = (size_t)(strrchr(p, '/') - p);

			if (dl + 1 + (size_t)r >= sizeof(p))
				break;
			p[dl] = '/';
			memcpy(p + dl + 1, link, (size_t)r + 1);
		}
	}
	if (realpath(path, next) != NULL)
		ent_add_path(v, n, next);
}

static void
ents_free(struct cw_ent *v, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		free(v[i].dir);
		free(v[i].name);
	}
	free(v);
}

/* Recompute the watch set: add the new directories, drop the ones no
 * longer needed. A directory that cannot be watched is left to the poll. */
static void
resync(struct cfgwatch *w)
{
	struct cw_ent *v = NULL;
	size_t n = 0, i, j;

	for (i = 0; i < w->n; i++)
		ent_add_chain(&v, &n, w->paths[i]);
	for (i = 0; i < n; i++) {
		for (j = 0; j < i && strcmp(v[j].dir, v[i].dir) != 0; j++)
			;
		if (j < i)
			v[i].wd = v[j].wd;
		else if ((v[i].wd = inotify_add_watch(w->fd, v[i].dir, CW_MASK)) < 0)
			log_debug("config watch: %s: %s", v[i].dir, strerror(errno));
	}
	for (i = 0; i < w->nents; i++) {
		int wd = w->ents[i].wd;
		bool keep = wd < 0;

		for (j = 0; j < n && !keep; j++)
			keep = v[j].wd == wd;
		for (j = 0; j < i && !keep; j++)
			keep = w->ents[j].wd == wd; /* removed already */
		if (!keep)
			inotify_rm_watch(w->fd, wd); /* EINVAL if it went with its directory */
	}
	ents_free(w->ents, w->nents);
	w->ents = v;
	w->nents = n;
}

/* ---- events ------------------------------------------------------------------------ */

static bool
relevant(struct cfgwatch *w, const struct inotify_event *ev)
{
	bool hit = false;
	size_t i;

	if (ev->mask & IN_Q_OVERFLOW)
		return true;
	for (i = 0; i < w->nents; i++) {
		if (w->ents[i].wd != ev->wd)
			continue;
		if (ev->mask & IN_IGNORED) {
			w->ents[i].wd = -1; /* the directory went: watched again on resync */
			hit = true;
		} else if (ev->len == 0) {
			hit = true; /* the directory itself */
		} else if (strcmp(ev->name, w->ents[i].name) == 0) {
			hit = true;
			if (ev->mask & IN_MODIFY)
				w->ents[i].writing = true;
			if (ev->mask &
			    (IN_CLOSE_WRITE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_CREATE))
				w->ents[i].writing = false;
		}
	}
	return hit;
}

/* Read every queued event; true if one concerns a watched entry. */
static bool
drain(struct cfgwatch *w)
{
	char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
	bool hit = false;
	ssize_t r;

	while ((r = read(w->fd, buf, sizeof(buf))) > 0) {
		char *p = buf;

		while (p + sizeof(struct inotify_event) <= buf + r) {
			const struct inotify_event *ev = (const struct inotify_event *)(void *)p;

			hit |= relevant(w, ev);
			p += sizeof(struct inotify_event) + ev->len;
		}
	}
	return hit;
}

/* Is a watched file open for writing (modified, not yet closed)? */
static bool
writing(const struct cfgwatch *w)
{
	size_t i;

	for (i = 0; i < w->nents; i++)
		if (w->ents[i].writing)
			return true;
	return false;
}

/* The longest a burst is waited for: longer while a writer has a file
 * open, so that a file is not read half written. */
static double
burst_cap(const struct cfgwatch *w)
{
	return w->first_event + (writing(w) ? CFGWATCH_WRITE_WAIT : CFGWATCH_MAX_WAIT);
}

/* A relevant event: read the files once the burst is quiet. */
static void
arm(struct cfgwatch *w)
{
	double now = np_mono_s(), delay = CFGWATCH_QUIET;
	struct timeval tv;

	if (w->first_event == 0)
		w->first_event = now;
	if (now + delay > burst_cap(w))
		delay = burst_cap(w) - now;
	if (delay < 0)
		delay = 0;
	tv = np_tv_of(delay);
	evtimer_add(w->ev_timer, &tv);
}

static void
check(struct cfgwatch *w)
{
	struct cfgwatch_snapshot snap = {0};

	if (w->first_event != 0 && writing(w) && np_mono_s() < burst_cap(w)) {
		arm(w); /* quiet, but still open for writing: wait for the close */
		return;
	}
	w->first_event = 0;
	resync(w);
	cfgwatch_snapshot_read((const char *const *)w->paths, w->n, &snap);
	if (drain(w)) {
		/* written to while we read: wait until it is quiet */
		cfgwatch_snapshot_clear(&snap);
		arm(w);
		return;
	}
	if (!w->have_seen || !cfgwatch_snapshot_equal(&w->seen, &snap)) {
		cfgwatch_seen(w, &snap);
		w->cb(&snap, w->arg); /* may free w: not touched after */
	}
	cfgwatch_snapshot_clear(&snap);
}

static void
on_inotify(evutil_socket_t fd, short what, void *arg)
{
	struct cfgwatch *w = arg;

	if (drain(w))
		arm(w);
}

static void
on_timer(evutil_socket_t fd, short what, void *arg)
{
	check(arg);
}

static void
on_poll(evutil_socket_t fd, short what, void *arg)
{
	struct cfgwatch *w = arg;

	if (w->first_event == 0) /* else a check is due anyway */
		check(w);
}

/* ---- life ------------------------------------------------------------------------- */

struct cfgwatch *
cfgwatch_new(struct event_base *base, const char *const *paths, size_t n,
	     const struct cfgwatch_snapshot *in_force, cfgwatch_cb cb, void *arg, char *err,
	     size_t errlen)
{
	struct cfgwatch *w;
	struct timeval poll = {(time_t)CFGWATCH_POLL, 0}, now = {0, 0};
	int fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	size_t i;

	if (fd < 0) {
		snprintf(err, errlen, "inotify: %s", strerror(errno));
		return NULL;
	}
	if ((w = calloc(1, sizeof(*w))) == NULL || (w->paths = calloc(n, sizeof(char *))) == NULL)
		np_oom();
	w->base = base;
	w->fd = fd;
	w->n = n;
	for (i = 0; i < n; i++)
		w->paths[i] = xstrdup(paths[i]);
	w->cb = cb;
	w->arg = arg;
	if (in_force != NULL)
		cfgwatch_seen(w, in_force);
	w->ev_in = event_new(base, fd, EV_READ | EV_PERSIST, on_inotify, w);
	w->ev_timer = evtimer_new(base, on_timer, w);
	w->ev_poll = event_new(base, -1, EV_PERSIST, on_poll, w);
	if (w->ev_in == NULL || w->ev_timer == NULL || w->ev_poll == NULL)
		np_oom();
	event_add(w->ev_in, NULL);
	event_add(w->ev_poll, &poll);
	resync(w);
	/* the first check at once: a change since the caller read the files */
	w->first_event = np_mono_s();
	evtimer_add(w->ev_timer, &now);
	return w;
}

void
cfgwatch_seen(struct cfgwatch *w, const struct cfgwatch_snapshot *snap)
{
	if (w == NULL || snap == &w->seen)
		return;
	cfgwatch_snapshot_clear(&w->seen);
	cfgwatch_snapshot_copy(&w->seen, snap);
	w->have_seen = true;
}

void
cfgwatch_free(struct cfgwatch *w)
{
	size_t i;

	if (w == NULL)
		return;
	event_free(w->ev_in);
	event_free(w->ev_timer);
	event_free(w->ev_poll);
	close(w->fd); /* drops every watch */
	ents_free(w->ents, w->nents);
	cfgwatch_snapshot_clear(&w->seen);
	for (i = 0; i < w->n; i++)
		free(w->paths[i]);
	free(w->paths);
	free(w);
}
