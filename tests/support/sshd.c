/* Test support: a real sshd on a free loopback port; see sshd.h. */
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/wait.h>

#include <netinet/in.h>
#include <arpa/inet.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tests/support/sshd.h"

#define SSHD_PATH	"/usr/sbin/sshd"
#define SSH_KEYGEN_PATH "/usr/bin/ssh-keygen"

static void
sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* Servers still running, stopped at exit: a failed assertion ends a test
 * before its test_sshd_stop(). */
#define MAX_LIVE 32
static struct test_sshd *live[MAX_LIVE];

static void
stop_live(void)
{
	int i;

	for (i = 0; i < MAX_LIVE; i++)
		if (live[i] != NULL)
			test_sshd_stop(live[i]);
}

static void
track(struct test_sshd *s, int add)
{
	static int registered;
	int i;

	if (!registered && add) {
		atexit(stop_live);
		registered = 1;
	}
	for (i = 0; i < MAX_LIVE; i++)
		if (live[i] == (add ? NULL : s)) {
			live[i] = add ? s : NULL;
			return;
		}
}

/* fork + exec argv with stdin/stdout on /dev/null, stderr on errpath (or
 * /dev/null) and no other inherited descriptors. The child gets SIGTERM if
 * the test process dies (even by SIGKILL, e.g. a test timeout). Returns the
 * pid or -1. */
static pid_t
spawn(char *const argv[], const char *errpath)
{
	pid_t pid, parent = getpid();
	int null, err;

	if ((pid = fork()) != 0)
		return pid;
	prctl(PR_SET_PDEATHSIG, SIGTERM);
	if (getppid() != parent)
		_exit(127);
	null = open("/dev/null", O_RDWR);
	err = errpath ? open(errpath, O_WRONLY | O_CREAT | O_APPEND, 0644) : null;
	if (null < 0 || err < 0)
		_exit(127);
	dup2(null, 0);
	dup2(null, 1);
	dup2(err, 2);
	closefrom(3);
	execv(argv[0], argv);
	_exit(127);
}

static int
run(char *const argv[])
{
	int status;
	pid_t pid = spawn(argv, NULL);

	if (pid < 0)
		return -1;
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -1;
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

int
test_mkdtemp(char *path, size_t len, const char *tag)
{
	const char *base = getenv("NP_TEST_TMP");

	if (base == NULL || base[0] == '\0')
		base = "/tmp";
	if ((size_t)snprintf(path, len, "%s/%s.XXXXXX", base, tag) >= len)
		return -1;
	return mkdtemp(path) == NULL ? -1 : 0;
}

int
test_free_port(void)
{
	struct sockaddr_in sin;
	socklen_t sl = sizeof(sin);
	int fd, port = -1;

	if ((fd = socket(AF_INET, SOCK_STREAM, 0)) < 0)
		return -1;
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(fd, (struct sockaddr *)&sin, sizeof(sin)) == 0 &&
	    getsockname(fd, (struct sockaddr *)&sin, &sl) == 0)
		port = ntohs(sin.sin_port);
	close(fd);
	return port;
}

/* Read "<type> <base64>" from a .pub file into a new string. */
static char *
read_pubkey(const char *path)
{
	char line[8192], type[64];
	char *b64, *out;
	FILE *f;

	if ((f = fopen(path, "r")) == NULL)
		return NULL;
	if (fgets(line, sizeof(line), f) == NULL) {
		fclose(f);
		return NULL;
	}
	fclose(f);
	b64 = malloc(sizeof(line));
	if (b64 == NULL || sscanf(line, "%63s %8191s", type, b64) != 2) {
		free(b64);
		return NULL;
	}
	if (asprintf(&out, "%s %s", type, b64) < 0)
		out = NULL;
	free(b64);
	return out;
}

/* 1 once the server at port sends its "SSH-" banner, 0 if not yet. */
static int
banner_ready(int port)
{
	struct sockaddr_in sin;
	struct timeval tv = {1, 0};
	char buf[8];
	ssize_t n;
	int fd, ok = 0;

	if ((fd = socket(AF_INET, SOCK_STREAM, 0)) < 0)
		return 0;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_port = htons((uint16_t)port);
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (connect(fd, (struct sockaddr *)&sin, sizeof(sin)) == 0) {
		n = recv(fd, buf, 4, MSG_WAITALL);
		ok = n == 4 && memcmp(buf, "SSH-", 4) == 0;
	}
	close(fd);
	return ok;
}

/* Start sshd on one port; 0 when it answers, -1 when it exited (port
 * taken, bad config). */
static int
start_on_port(struct test_sshd *s, const char *const *types, size_t ntypes)
{
	char conf[600], logf[600], pidf[600];
	char *argv[] = {SSHD_PATH, "-D", "-e", "-f", conf, NULL};
	FILE *f;
	size_t i;
	int status, tries;

	snprintf(conf, sizeof(conf), "%s/sshd_config", s->dir);
	snprintf(logf, sizeof(logf), "%s/sshd.log", s->dir);
	snprintf(pidf, sizeof(pidf), "%s/sshd.pid", s->dir);
	if ((f = fopen(conf, "w")) == NULL)
		return -1;
	fprintf(f, "ListenAddress 127.0.0.1\nPort %d\n", s->port);
	for (i = 0; i < ntypes; i++)
		fprintf(f, "HostKey %s/ssh_host_%s_key\n", s->dir, types[i]);
	fprintf(f,
		"PidFile %s\nUsePAM no\nStrictModes no\n"
		"MaxStartups 200\nLoginGraceTime 30\nLogLevel INFO\n",
		pidf);
	fclose(f);

	if ((s->pid = spawn(argv, logf)) < 0)
		return -1;
	for (tries = 0; tries < 100; tries++) {
		if (waitpid(s->pid, &status, WNOHANG) == s->pid) {
			s->pid = -1;
			return -1;
		}
		if (banner_ready(s->port))
			return 0;
		sleep_ms(100);
	}
	kill(s->pid, SIGKILL);
	waitpid(s->pid, &status, 0);
	s->pid = -1;
	return -1;
}

struct test_sshd *
test_sshd_start(const char *dir, const char *const *types)
{
	return test_sshd_start_port(dir, types, 0);
}

struct test_sshd *
test_sshd_start_port(const char *dir, const char *const *types, int port)
{
	static const char *const all[] = {"rsa", "ecdsa", "ed25519", NULL};
	struct test_sshd *s;
	char key[700], pub[710];
	size_t n, i;
	int tries;

	if (types == NULL)
		types = all;
	for (n = 0; types[n] != NULL; n++)
		;
	if (n == 0 || n > TEST_SSHD_MAX_KEYS)
		return NULL;
	if ((s = calloc(1, sizeof(*s))) == NULL)
		return NULL;
	s->pid = -1;
	snprintf(s->dir, sizeof(s->dir), "%s", dir);
	if (mkdir(s->dir, 0700) < 0 && errno != EEXIST) {
		fprintf(stderr, "test_sshd: mkdir %s: %s\n", s->dir, strerror(errno));
		goto fail;
	}
	if (geteuid() == 0 && mkdir("/run/sshd", 0755) < 0 && errno != EEXIST) {
		fprintf(stderr, "test_sshd: mkdir /run/sshd: %s\n", strerror(errno));
		goto fail;
	}
	for (i = 0; i < n; i++) {
		/* 2048-bit RSA: plenty for a test, and quick to generate. */
		char *argv[] = {SSH_KEYGEN_PATH,
				"-q",
				"-t",
				(char *)types[i],
				"-N",
				"",
				"-C",
				"",
				"-f",
				key,
				strcmp(types[i], "rsa") == 0 ? "-b" : NULL,
				"2048",
				NULL};

		snprintf(key, sizeof(key), "%s/ssh_host_%s_key", s->dir, types[i]);
		snprintf(pub, sizeof(pub), "%s.pub", key);
		unlink(key);
		unlink(pub);
		if (run(argv) < 0 || (s->keys[i] = read_pubkey(pub)) == NULL) {
			fprintf(stderr, "test_sshd: ssh-keygen -t %s failed\n", types[i]);
			goto fail;
		}
		s->nkeys++;
	}
	for (tries = 0; tries < (port > 0 ? 1 : 5); tries++) {
		if ((s->port = port > 0 ? port : test_free_port()) < 0)
			break;
		if (start_on_port(s, types, n) == 0) {
			track(s, 1);
			return s;
		}
	}
	fprintf(stderr, "test_sshd: sshd did not start (see %s/sshd.log)\n", s->dir);
fail:
	test_sshd_stop(s);
	return NULL;
}

void
test_sshd_stop(struct test_sshd *s)
{
	int status, i;
	size_t k;

	if (s == NULL)
		return;
	track(s, 0);
	if (s->pid > 0) {
		kill(s->pid, SIGTERM);
		for (i = 0; i < 50; i++) {
			if (waitpid(s->pid, &status, WNOHANG) == s->pid)
				break;
			sleep_ms(100);
		}
		if (i == 50) {
			kill(s->pid, SIGKILL);
			waitpid(s->pid, &status, 0);
		}
	}
	for (k = 0; k < s->nkeys; k++)
		free(s->keys[k]);
	free(s);
}
