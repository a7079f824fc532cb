/*
 * lib/core/memtrim: the start-up working-set trim. A file mapped read-only
 * and private stands in for a library's text; the kernel's own account
 * (/proc/self/smaps) says what is resident before and after.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "memtrim.h"

#define PAGES 64

/* Rss and Anonymous (kB) of the mapping that starts at addr. */
static void
smaps_of(const void *addr, long *rss, long *anon)
{
	char line[4352];
	unsigned long start, end;
	int in = 0;
	FILE *f = fopen("/proc/self/smaps", "r");

	cr_assert_not_null(f);
	*rss = *anon = -1;
	while (fgets(line, sizeof(line), f) != NULL) {
		char perms[8];

		if (sscanf(line, "%lx-%lx %7s ", &start, &end, perms) == 3) {
			if (in)
				break;
			in = start == (unsigned long)addr;
			continue;
		}
		if (in && strncmp(line, "Rss:", 4) == 0)
			*rss = strtol(line + 4, NULL, 10);
		else if (in && strncmp(line, "Anonymous:", 10) == 0)
			*anon = strtol(line + 10, NULL, 10);
	}
	fclose(f);
	cr_assert_geq(*rss, 0, "no mapping at %p", addr);
}

/* A file of PAGES pages, page i filled with the byte 'a' + i % 26; named
 * in path (the caller unlinks it: a deleted file's mappings are skipped). */
static int
pattern_file(char *tmpl)
{
	long pg = sysconf(_SC_PAGESIZE);
	char *buf = malloc((size_t)pg);
	int fd = mkstemp(tmpl);

	cr_assert_geq(fd, 0);
	for (int i = 0; i < PAGES; i++) {
		memset(buf, 'a' + i % 26, (size_t)pg);
		cr_assert_eq(write(fd, buf, (size_t)pg), pg);
	}
	free(buf);
	return fd;
}

static char *
map_touched(int fd, int prot)
{
	long pg = sysconf(_SC_PAGESIZE);
	volatile char *p = mmap(NULL, (size_t)(PAGES * pg), prot, MAP_PRIVATE, fd, 0);
	unsigned sum = 0;

	cr_assert_neq((void *)p, MAP_FAILED);
	for (int i = 0; i < PAGES; i++)
		sum += (unsigned char)p[i * pg];
	cr_assert_gt(sum, 0);
	return (char *)p;
}

Test(memtrim, drops_clean_read_only_file_pages_and_keeps_private_ones)
{
	long pg = sysconf(_SC_PAGESIZE);
	char path[] = "/tmp/np-memtrim.XXXXXX";
	int fd = pattern_file(path);
	char *text = map_touched(fd, PROT_READ);	       /* a library's text */
	char *relro = map_touched(fd, PROT_READ | PROT_WRITE); /* relocated, then sealed */
	char *data = map_touched(fd, PROT_READ | PROT_WRITE);  /* a library's .data */
	long rss, anon, relro_rss, data_rss, got;

	relro[3 * pg] = 'Z';
	cr_assert_eq(mprotect(relro, (size_t)(PAGES * pg), PROT_READ), 0);
	smaps_of(text, &rss, &anon);
	cr_assert_eq(rss, PAGES * pg / 1024, "every touched page resident: %ld kB", rss);
	cr_assert_eq(anon, 0);
	smaps_of(relro, &relro_rss, &anon);
	cr_assert_gt(anon, 0, "the written page is a private copy");
	smaps_of(data, &data_rss, &anon);

	got = np_mem_trim();
	cr_assert_geq(got, PAGES * pg / 1024, "reported %ld kB", got);

	smaps_of(text, &rss, &anon);
	cr_assert_eq(rss, 0, "the clean read-only mapping left the resident set: %ld kB", rss);
	/* and reads as before: the pages come back from the page cache */
	for (int i = 0; i < PAGES; i++)
		cr_assert_eq(text[i * pg + 17], 'a' + i % 26);
	smaps_of(text, &rss, &anon);
	cr_assert_gt(rss, 0);

	/* a mapping holding a private page keeps it, and every other page */
	smaps_of(relro, &rss, &anon);
	cr_assert_eq(rss, relro_rss);
	cr_assert_eq(relro[3 * pg], 'Z');
	cr_assert_eq(relro[4 * pg], 'a' + 4);
	/* a writable mapping is never trimmed */
	smaps_of(data, &rss, &anon);
	cr_assert_eq(rss, data_rss);
	close(fd);
	unlink(path);
}

Test(memtrim, environment_turns_it_off)
{
	long pg = sysconf(_SC_PAGESIZE);
	char path[] = "/tmp/np-memtrim.XXXXXX";
	int fd = pattern_file(path);
	char *text = map_touched(fd, PROT_READ);
	long rss, anon;

	setenv("NODEPOOLD_NO_MEM_TRIM", "1", 1);
	cr_assert_eq(np_mem_trim(), 0);
	smaps_of(text, &rss, &anon);
	cr_assert_eq(rss, PAGES * pg / 1024);
	unsetenv("NODEPOOLD_NO_MEM_TRIM");
	close(fd);
	unlink(path);
}
