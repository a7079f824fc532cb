/*
 * Test support: a real OpenSSH server (Debian's openssh-server,
 * /usr/sbin/sshd) on a free loopback port, for the nodescan unit tests and
 * the static driver's tests.
 *
 * test_sshd_start() generates fresh host keys with ssh-keygen in the given
 * directory, writes an sshd_config there (ListenAddress 127.0.0.1, the port,
 * those HostKeys, PidFile in the directory, UsePAM no, StrictModes no,
 * MaxStartups 200), runs `sshd -D -e -f <dir>/sshd_config` with its log in
 * <dir>/sshd.log, and returns once the server sends its SSH banner. As root
 * it creates /run/sshd (sshd's privilege separation directory) if missing.
 * A port taken between the probe and sshd's bind is retried on another port.
 *
 * test_sshd_stop() stops exactly that process (SIGTERM by pid, SIGKILL after
 * 5 s) and reaps it. Nothing is killed by name. Servers a test leaves running
 * (a failed assertion skips its test_sshd_stop) are stopped at exit, and an
 * sshd gets SIGTERM when the process that started it dies
 * (PR_SET_PDEATHSIG), so none outlives its test.
 *
 * Linked into every test binary (as every file in tests/support/);
 * include "sshd.h".
 */
#ifndef NP_TEST_SSHD_H
#define NP_TEST_SSHD_H

#include <stddef.h>
#include <sys/types.h>

#define TEST_SSHD_MAX_KEYS 4

struct test_sshd {
	pid_t pid;
	int port;      /* on 127.0.0.1 */
	char dir[512]; /* the directory given to test_sshd_start() */
	size_t nkeys;
	/* The server's host public keys, "<type> <base64>" (the .pub files'
	 * first two fields, no comment), in the order of the types asked for;
	 * e.g. "ssh-ed25519 AAAA...". */
	char *keys[TEST_SSHD_MAX_KEYS];
};

/*
 * Start an sshd with one host key per ssh-keygen type in types (a
 * NULL-terminated list of "rsa", "ecdsa", "ed25519"; NULL means all three),
 * in dir (created if missing; used only by this server). Returns NULL with a
 * message on stderr on failure.
 */
struct test_sshd *test_sshd_start(const char *dir, const char *const *types);

/* The same on a given loopback port (no retry on another port if it is
 * taken); port <= 0 means a free one. For a host that comes up late. */
struct test_sshd *test_sshd_start_port(const char *dir, const char *const *types, int port);

/* Stop the server (by pid), reap it and free s. NULL is a no-op. */
void test_sshd_stop(struct test_sshd *s);

/*
 * Make a fresh directory for one test under $NP_TEST_TMP (or /tmp) named
 * "<tag>.XXXXXX"; path gets the result. Returns 0 or -1.
 */
int test_mkdtemp(char *path, size_t len, const char *tag);

/* A loopback TCP port that nothing listens on right now (bound to port 0,
 * read, closed), or -1. */
int test_free_port(void);

#endif
