#include "memtrim.h"

#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "log.h"

/* The mapping being read: its header line, then its "Key: N kB" lines. */
struct trim_map {
	unsigned long start, end;
	int candidate; /* private, read-only, of a file */
	long rss, anon;
};

/*
 * A header: "start-end perms offset dev inode [path]". Fills m; 0 when the
 * line is not a header (a "Key: value" line).
 */
static int
trim_header(const char *line, struct trim_map *m)
{
	unsigned long start, end, inode;
	char perms[8];
	int pos = 0;
	const char *path;
	size_t plen;

	if (sscanf(line, "%lx-%lx %7s %*s %*s %lu %n", &start, &end, perms, &inode, &pos) < 4 ||
	    pos == 0)
		return 0;
	path = line + pos;
	plen = strcspn(path, "\n");
	memset(m, 0, sizeof(*m));
	m->start = start;
	m->end = end;
	m->rss = -1;
	m->anon = -1;
	m->candidate = strlen(perms) == 4 && perms[1] == '-' && perms[3] == 'p' && inode != 0 &&
		       path[0] == '/' &&
		       !(plen >= 10 && memcmp(path + plen - 10, " (deleted)", 10) == 0);
	return 1;
}

long
np_mem_trim(void)
{
	struct trim_map m = {0};
	int have = 0;
	long total = 0;
	char line[4352]; /* a path may be PATH_MAX long */
	FILE *f;

	if (getenv("NODEPOOLD_NO_MEM_TRIM") != NULL)
		return 0;
	f = fopen("/proc/self/smaps", "re");
	if (f == NULL)
		return -1;
	for (;;) {
		char *got = fgets(line, sizeof(line), f);
		struct trim_map next;
		int header = got != NULL && trim_header(line, &next);

		if (got == NULL || header) {
			/* the previous mapping is complete; dropping its pages
			 * changes no mapping, so the reading goes on */
			if (have && m.candidate && m.rss > 0 && m.anon == 0 &&
			    madvise((void *)m.start, m.end - m.start, MADV_DONTNEED) == 0)
				total += m.rss;
			if (got == NULL)
				break;
			m = next;
			have = 1;
			continue;
		}
		if (!have)
			continue;
		if (strncmp(line, "Rss:", 4) == 0)
			m.rss = strtol(line + 4, NULL, 10);
		else if (strncmp(line, "Anonymous:", 10) == 0)
			m.anon = strtol(line + 10, NULL, 10);
		/* a line longer than the buffer: its tail reads as a line
		 * that is neither a header nor a key we use */
	}
	fclose(f);
	malloc_trim(0);
	return total;
}

void
np_mem_trim_startup(const char *who)
{
	long before = np_mem_rss_kb();
	long kb = np_mem_trim();

	if (kb < 0)
		log_warn("start-up trim: /proc/self/smaps: %s", strerror(errno));
	else if (kb > 0)
		log_info("%s: start-up pages trimmed from the resident set: RSS %ld -> %ld KiB",
			 who, before, np_mem_rss_kb());
}

long
np_mem_rss_kb(void)
{
	long size, resident, pg = sysconf(_SC_PAGESIZE);
	FILE *f = fopen("/proc/self/statm", "re");
	int n;

	if (f == NULL)
		return -1;
	n = fscanf(f, "%ld %ld", &size, &resident);
	fclose(f);
	return n == 2 && pg > 0 ? resident * (pg / 1024) : -1;
}
