/*
 * lib/core/memtrim: the start-up trim gives free heap back and leaves
 * every file mapping alone (issue 23, finding 8: the MADV_DONTNEED of
 * read-only file mappings could discard relocated pages that were swapped
 * out). A file mapped read-only and private stands in for a library's
 * text; the kernel's own account (/proc/self/smaps) says what is resident
 * before and after.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "lib/core/memtrim.h"

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

Test(memtrim, leaves_file_mappings_resident_and_unchanged)
{
	long pg = sysconf(_SC_PAGESIZE);
	char path[] = "/tmp/np-memtrim.XXXXXX";
	int fd = pattern_file(path);
	char *text = map_touched(fd, PROT_READ);	       /* a library's text */
	char *relro = map_touched(fd, PROT_READ | PROT_WRITE); /* relocated, then sealed */
	long rss, anon, relro_rss;

	relro[3 * pg] = 'Z';
	cr_assert_eq(mprotect(relro, (size_t)(PAGES * pg), PROT_READ), 0);
	smaps_of(relro, &relro_rss, &anon);
	cr_assert_gt(anon, 0, "the written page is a private copy");

	cr_assert_geq(np_mem_trim(), 0);

	smaps_of(text, &rss, &anon);
	cr_assert_eq(rss, PAGES * pg / 1024, "the read-only file mapping stays resident: %ld kB",
		     rss);
	smaps_of(relro, &rss, &anon);
	cr_assert_eq(rss, relro_rss);
	cr_assert_eq(relro[3 * pg], 'Z', "the private (relocated) page is kept");
	cr_assert_eq(relro[4 * pg], 'a' + 4);
	close(fd);
	unlink(path);
}

#if defined(__SANITIZE_ADDRESS__)
#define HEAP_IS_GLIBCS 0 /* ASan's allocator: malloc_trim has no heap to trim */
#else
#define HEAP_IS_GLIBCS 1
#endif

Test(memtrim, gives_free_heap_back)
{
	enum { N = 512, SIZE = 64 * 1024 }; /* under glibc's mmap threshold */
	char *blocks[N];
	long before, after, got;

	if (!HEAP_IS_GLIBCS)
		cr_skip_test("sanitizer build: the heap is not glibc's");
	for (int i = 0; i < N; i++) {
		blocks[i] = malloc(SIZE);
		cr_assert_not_null(blocks[i]);
		memset(blocks[i], i, SIZE);
	}
	/* free all but the last: the top of the heap stays in use, so only
	 * malloc_trim (not free) can give the pages below it back */
	for (int i = 0; i < N - 1; i++)
		free(blocks[i]);
	before = np_mem_rss_kb();
	got = np_mem_trim();
	after = np_mem_rss_kb();
	cr_assert_gt(before - after, (long)(N / 2) * SIZE / 1024, "RSS %ld -> %ld kB", before,
		     after);
	cr_assert_gt(got, 0, "reported %ld kB", got);
	free(blocks[N - 1]);
}

Test(memtrim, environment_turns_it_off)
{
	setenv("NODEPOOLD_NO_MEM_TRIM", "1", 1);
	cr_assert_eq(np_mem_trim(), 0);
	unsetenv("NODEPOOLD_NO_MEM_TRIM");
}

Test(memtrim, pss_and_rss_are_read)
{
	long rss = np_mem_rss_kb(), pss = np_mem_pss_kb();

	cr_assert_gt(rss, 0);
	cr_assert_gt(pss, 0);
	/* shared pages count in full in RSS, in part in PSS */
	cr_assert_leq(pss, rss + 1024, "PSS %ld, RSS %ld kB", pss, rss);
}
