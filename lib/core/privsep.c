/*
 * Privilege separation helpers (privsep.h).
 */
#include "lib/core/privsep.h"

#include <errno.h>
#include <grp.h>
#include <linux/capability.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#define ALLOW_ROOT_ENV "NODEPOOL_ALLOW_ROOT"

int
privsep_user_lookup(const char *name, struct privsep_user *u, char *err, size_t errlen)
{
	struct passwd *pw;
	char *end;
	unsigned long n;
	int ngroups = PRIVSEP_MAX_GROUPS;

	memset(u, 0, sizeof(*u));
	errno = 0;
	pw = getpwnam(name);
	if (pw == NULL && name[0] >= '0' && name[0] <= '9') {
		n = strtoul(name, &end, 10);
		if (*end == '\0')
			pw = getpwuid((uid_t)n);
	}
	if (pw == NULL) {
		snprintf(err, errlen, "no user %s%s%s", name, errno ? ": " : "",
			 errno ? strerror(errno) : "");
		return -1;
	}
	if (strlen(pw->pw_name) >= sizeof(u->name)) {
		snprintf(err, errlen, "user name %s is too long", pw->pw_name);
		return -1;
	}
	if (getgrouplist(pw->pw_name, pw->pw_gid, u->groups, &ngroups) < 0) {
		snprintf(err, errlen, "user %s is in more than %d groups", pw->pw_name,
			 PRIVSEP_MAX_GROUPS);
		return -1;
	}
	u->set = true;
	u->uid = pw->pw_uid;
	u->gid = pw->pw_gid;
	u->ngroups = ngroups;
	strcpy(u->name, pw->pw_name);
	return 0;
}

/* Our capability sets, version 3 (two 32-bit words per set). */
static int
caps_get(struct __user_cap_data_struct data[2])
{
	struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};

	memset(data, 0, 2 * sizeof(data[0]));
	return (int)syscall(SYS_capget, &hdr, data);
}

static bool
cap_effective(const struct __user_cap_data_struct data[2], int cap)
{
	return (data[cap / 32].effective & (1u << (cap % 32))) != 0;
}

bool
privsep_can_become(const struct privsep_user *u)
{
	struct __user_cap_data_struct data[2];

	if (!u->set || (u->uid == geteuid() && u->gid == getegid()))
		return true;
	if (caps_get(data) < 0)
		return false;
	return cap_effective(data, CAP_SETUID) && cap_effective(data, CAP_SETGID);
}

int
privsep_child_drop(const struct privsep_user *u, bool no_new_privs)
{
	struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
	struct __user_cap_data_struct none[2];

	/* already that user (nodepoold run as it): nothing to change, and
	 * setgroups would need CAP_SETGID */
	if (u != NULL && u->set && (geteuid() == 0 || u->uid != geteuid() || u->gid != getegid())) {
		if (setgroups((size_t)u->ngroups, u->groups) < 0 ||
		    setresgid(u->gid, u->gid, u->gid) < 0 || setresuid(u->uid, u->uid, u->uid) < 0)
			return -1;
	}
	/* Ambient capabilities (a unit's AmbientCapabilities=) survive an
	 * exec by a non-root user; the other sets are emptied so that the
	 * child holds none either way. EINVAL: a kernel without ambient
	 * capabilities, nothing to clear. */
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
		return -1;
	memset(none, 0, sizeof(none));
	if (syscall(SYS_capset, &hdr, none) < 0)
		return -1;
	if (no_new_privs && prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return -1;
	return 0;
}

bool
privsep_root_allowed(void)
{
	const char *v = getenv(ALLOW_ROOT_ENV);

	return v != NULL && strcmp(v, "1") == 0;
}

void
privsep_allow_root(void)
{
	if (setenv(ALLOW_ROOT_ENV, "1", 1) < 0)
		abort();
}

int
privsep_root_check(const char *prog)
{
	if (geteuid() == 0 && !privsep_root_allowed()) {
		fprintf(stderr,
			"%s: refusing to run as root with no user to drop to: run it as an "
			"unprivileged user (nodepoold: -u USER), or pass --allow-root "
			"(" ALLOW_ROOT_ENV "=1)\n",
			prog);
		return -1;
	}
	return 0;
}

void
privsep_harden(bool no_new_privs)
{
	struct rlimit none = {0, 0};

	(void)prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	(void)setrlimit(RLIMIT_CORE, &none);
	if (no_new_privs)
		(void)prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
}

int
privsep_start(const char *prog, bool no_new_privs)
{
	if (privsep_root_check(prog) < 0)
		return -1;
	privsep_harden(no_new_privs);
	return 0;
}

void
privsep_free_secret(void *p, size_t n)
{
	if (p == NULL)
		return;
	explicit_bzero(p, n);
	free(p);
}

void
privsep_free_secret_str(char *s)
{
	if (s != NULL)
		privsep_free_secret(s, strlen(s));
}
