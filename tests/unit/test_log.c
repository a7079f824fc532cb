/*
 * lib/core/log: what reaches the log from outside data (a cloud's error
 * body, a record from ZooKeeper) cannot forge a log line or drive the
 * terminal that shows it (issue 23, finding 7).
 */
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/core/log.h"

/* Runs the logging in fn with stderr on a file; returns what was written
 * (malloc'd). */
static char *
captured(void (*fn)(void))
{
	char path[] = "/tmp/np-log.XXXXXX", *out;
	int fd = mkstemp(path), saved = dup(STDERR_FILENO);
	long len;
	FILE *f;

	cr_assert_geq(fd, 0);
	dup2(fd, STDERR_FILENO);
	fn();
	dup2(saved, STDERR_FILENO);
	close(saved);
	f = fdopen(fd, "r");
	fseek(f, 0, SEEK_END);
	len = ftell(f);
	rewind(f);
	out = calloc(1, (size_t)len + 1);
	cr_assert_eq(fread(out, 1, (size_t)len, f), (size_t)len);
	fclose(f);
	unlink(path);
	return out;
}

static void
log_forgery(void)
{
	log_init("worker[p1]", LOG_LVL_INFO);
	log_warn("server create failed: %s",
		 "quota\n2026-01-01 00:00:00.000 ERROR nodepoold: forged\r\x1b[2Jend\x7f\n");
}

Test(log, outside_data_cannot_forge_a_line)
{
	char *out = captured(log_forgery), *nl;

	/* one record: its continuation starts with a tab, never a time */
	nl = strchr(out, '\n');
	cr_assert_not_null(nl);
	cr_assert_eq(nl[1], '\t', "%s", out);
	cr_assert_not_null(strstr(out, " WARNING worker[p1]: server create failed: quota\n\t2026"));
	cr_assert_not_null(strstr(out, "forged\\x0d\\x1b[2Jend\\x7f\n"), "%s", out);
	cr_assert_null(strchr(out, '\r'));
	cr_assert_null(strchr(out, '\x1b'));
	/* the record ends with one newline (the message's own is dropped) */
	cr_assert_eq(strlen(out), (size_t)(strrchr(out, '\n') - out) + 1);
	cr_assert_neq(out[strlen(out) - 2], '\n');
	free(out);
}

static void
log_long(void)
{
	char big[5000];

	memset(big, '\x01', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	log_init("web", LOG_LVL_INFO);
	log_info("%s", big);
}

Test(log, a_long_escaped_message_is_cut_not_overrun)
{
	char *out = captured(log_long);

	cr_assert_lt(strlen(out), 2048);
	cr_assert_eq(out[strlen(out) - 1], '\n');
	cr_assert_not_null(strstr(out, "\\x01\\x01"));
	free(out);
}
