#include "lib/core/log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/time.h>
#include <unistd.h>

static char log_tag[64] = "nodepoold";
static enum log_level log_level = LOG_LVL_INFO;
static const char *const level_names[] = {"ERROR", "WARNING", "INFO", "DEBUG"};

void
log_init(const char *tag, enum log_level level)
{
	const char *dbg = getenv("NP_DEBUG");

	snprintf(log_tag, sizeof(log_tag), "%s", tag);
	log_level = level;
	if (dbg != NULL && *dbg != '\0' && strcmp(dbg, "0") != 0)
		log_level = LOG_LVL_DEBUG;
}

enum log_level
log_get_level(void)
{
	return log_level;
}

void
log_set_level(enum log_level level)
{
	log_level = level;
}

/*
 * Appends msg to line (at *n, at most size - 2 bytes in all, leaving room
 * for the newline) so that nothing in it can pass for a log line of its
 * own or drive a terminal: a cloud's error body, a ZooKeeper record or a
 * request path is logged as it came. A newline goes out as a newline and
 * a tab (a continuation line: a state dump stays readable, and a line of
 * ours always starts with the time); other control characters and DEL as
 * \xHH.
 */
static void
append_escaped(char *line, size_t size, size_t *n, const char *msg)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *p;

	for (p = (const unsigned char *)msg; *p != '\0'; p++) {
		size_t room = size - 2 - *n;
		if (*p == '\n' && p[1] != '\0') {
			if (room < 2)
				break;
			line[(*n)++] = '\n';
			line[(*n)++] = '\t';
		} else if ((*p < 0x20 && *p != '\t' && *p != '\n') || *p == 0x7f) {
			if (room < 4)
				break;
			line[(*n)++] = '\\';
			line[(*n)++] = 'x';
			line[(*n)++] = hex[*p >> 4];
			line[(*n)++] = hex[*p & 15];
		} else if (*p != '\n') {
			if (room < 1)
				break;
			line[(*n)++] = (char)*p;
		}
	}
}

void
log_vlog(enum log_level level, const char *fmt, va_list ap)
{
	char line[2048], msg[2048];
	struct timeval tv;
	struct tm tm;
	size_t n;
	int r, saved = errno;

	if (level > log_level)
		return;
	gettimeofday(&tv, NULL);
	gmtime_r(&tv.tv_sec, &tm);
	n = strftime(line, sizeof(line), "%Y-%m-%d %H:%M:%S", &tm);
	r = snprintf(line + n, sizeof(line) - n, ".%03ld %s %s: ", (long)tv.tv_usec / 1000,
		     level_names[level], log_tag);
	if (r > 0)
		n += (size_t)r < sizeof(line) - n ? (size_t)r : sizeof(line) - n - 1;
	vsnprintf(msg, sizeof(msg), fmt, ap);
	if (n >= sizeof(line) - 1)
		n = sizeof(line) - 2;
	append_escaped(line, sizeof(line), &n, msg);
	line[n++] = '\n';
	if (write(STDERR_FILENO, line, n) < 0) {
		/* Nowhere left to report it. */
	}
	errno = saved;
}

#define LOG_FN(name, lvl)                                                                          \
	void name(const char *fmt, ...)                                                            \
	{                                                                                          \
		va_list ap;                                                                        \
		va_start(ap, fmt);                                                                 \
		log_vlog(lvl, fmt, ap);                                                            \
		va_end(ap);                                                                        \
	}
LOG_FN(log_error, LOG_LVL_ERROR)
LOG_FN(log_warn, LOG_LVL_WARN)
LOG_FN(log_info, LOG_LVL_INFO)
LOG_FN(log_debug, LOG_LVL_DEBUG)

void
fatal(const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	int e = errno;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	log_error("%s: %s", msg, strerror(e));
	exit(1);
}

void
fatalx(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_vlog(LOG_LVL_ERROR, fmt, ap);
	va_end(ap);
	exit(1);
}
