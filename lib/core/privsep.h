/*
 * Privilege separation, the way OpenBSD's daemons split theirs: a parent
 * that keeps only what it needs to start its children (nodepoold, root or
 * holding CAP_SETUID/CAP_SETGID/CAP_KILL) and children that each run as
 * the user of their role, with no capabilities, no way to gain any by
 * exec (PR_SET_NO_NEW_PRIVS) and no core dump or ptrace attach by their
 * own user (PR_SET_DUMPABLE 0): a crashed launcher leaves no cloud
 * credentials in a core file. See nodepoold(8), SECURITY.
 *
 * Running as root with nothing to drop to is refused unless the
 * operator says so: --allow-root on nodepoold and nodepool-builder, or
 * NODEPOOL_ALLOW_ROOT=1 in the environment (which those options set, so
 * that the children they start inherit the decision).
 */
#ifndef NP_PRIVSEP_H
#define NP_PRIVSEP_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* The most supplementary groups a role's user keeps. */
#define PRIVSEP_MAX_GROUPS 32

/*
 * A user to run a child as, resolved in the parent (getpwnam is not
 * async-signal-safe, so it cannot run between fork and exec). A zeroed
 * struct (set false) means "stay who the parent is".
 */
struct privsep_user {
	bool set;
	uid_t uid;
	gid_t gid;
	int ngroups;
	gid_t groups[PRIVSEP_MAX_GROUPS];
	char name[64];
};

/*
 * Resolves a user name (or a numeric uid) with its primary and
 * supplementary groups. 0, or -1 with "no user NAME" (or the reason) in
 * err.
 */
int privsep_user_lookup(const char *name, struct privsep_user *u, char *err, size_t errlen);

/*
 * May this process become u? True when u is unset or is already us, or
 * when we hold CAP_SETUID and CAP_SETGID (root, or nodepoold given them
 * as ambient capabilities by its unit).
 */
bool privsep_can_become(const struct privsep_user *u);

/*
 * Between fork and exec, in the child: only async-signal-safe calls.
 * Becomes u (groups, gid, uid: real, effective and saved) when it is set,
 * then drops every capability (ambient, inheritable, permitted,
 * effective), so that nothing survives the exec even when the parent
 * holds capabilities as a non-root user; sets PR_SET_NO_NEW_PRIVS when
 * no_new_privs (everything but the builder, whose diskimage-builder runs
 * sudo). 0, or -1 with errno set (the caller _exits).
 */
int privsep_child_drop(const struct privsep_user *u, bool no_new_privs);

/*
 * At the start of every daemon process (nodepoold, nodepool-launcher,
 * nodepool-web, nodepool-builder and its workers), before any secret is
 * read: PR_SET_DUMPABLE 0 and RLIMIT_CORE 0 (neither survives exec, so
 * each process sets its own), and PR_SET_NO_NEW_PRIVS when no_new_privs.
 * A kernel or sandbox that refuses one leaves the process as it was.
 */
void privsep_harden(bool no_new_privs);

/*
 * The root check: as root (euid 0) without privsep_root_allowed(), writes
 * "PROG: refusing to run as root ..." to stderr and returns -1 (the
 * caller exits with its permanent code). 0 otherwise.
 */
int privsep_root_check(const char *prog);

/* privsep_root_check, then privsep_harden: what a child does first. */
int privsep_start(const char *prog, bool no_new_privs);

/* NODEPOOL_ALLOW_ROOT=1 in the environment. */
bool privsep_root_allowed(void);

/* Says root is allowed: sets NODEPOOL_ALLOW_ROOT=1 for this process and
 * every child it starts. */
void privsep_allow_root(void);

/*
 * Overwrites n bytes at p with zeros in a way the compiler keeps
 * (explicit_bzero), then frees p. For passwords, tokens and keys; a
 * NULL p is a no-op.
 */
void privsep_free_secret(void *p, size_t n);

/* privsep_free_secret of a NUL-terminated string (its whole length). */
void privsep_free_secret_str(char *s);

#endif
