#include "lib/core/memtrim.h"

#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/core/log.h"

long
np_mem_trim(void)
{
	long before, after;

	if (getenv("NODEPOOLD_NO_MEM_TRIM") != NULL)
		return 0;
	before = np_mem_rss_kb();
	malloc_trim(0);
	after = np_mem_rss_kb();
	return before > after && after >= 0 ? before - after : 0;
}

void
np_mem_trim_startup(const char *who)
{
	long before = np_mem_rss_kb();
	long kb = np_mem_trim();

	if (kb > 0)
		log_info("%s: free heap given back: RSS %ld -> %ld KiB", who, before,
			 np_mem_rss_kb());
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

long
np_mem_pss_kb(void)
{
	char line[256];
	long kb = 0;
	FILE *f = fopen("/proc/self/smaps_rollup", "re");

	if (f == NULL)
		return 0;
	while (fgets(line, sizeof(line), f) != NULL)
		if (strncmp(line, "Pss:", 4) == 0) {
			kb = strtol(line + 4, NULL, 10);
			break;
		}
	fclose(f);
	return kb;
}
