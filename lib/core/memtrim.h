/*
 * Working-set trim, once a process's start-up is done (issue 13).
 *
 * Every page of a shared library that a process has touched stays mapped
 * in it, and counts in its resident set size (RSS), even when the code was
 * run once at start-up and never again: the dynamic loader's relocation
 * work, OpenSSL 3's provider and configuration loading, the first TLS
 * handshake, nodepool.yaml parsing. In a worker that is ~4 of its 7 MiB of
 * file-backed RSS, and nodepoold runs one worker per provider.
 *
 * np_mem_trim() drops those pages from this process's page tables: every
 * private, read-only mapping of a file (program text and read-only data of
 * the binary and its libraries) that holds no private copy of a page gets
 * madvise(MADV_DONTNEED). Nothing is lost: the pages stay in the page
 * cache, shared with every other process, and a page run again is mapped
 * again on its next access (a minor fault). A mapping holding a private
 * page (relocated read-only data, a debugger's breakpoint) or one that is
 * writable is left alone, as MADV_DONTNEED would throw its private pages
 * away. Then malloc_trim(0) returns the heap's free pages.
 *
 * This lowers RSS, what `ps` and `top` show per process; the machine's
 * memory use (PSS, a cgroup's memory.current) hardly moves, as shared
 * library pages were counted once there already. bench/scale.sh reports
 * both.
 *
 * Call it from the thread that loads libraries (dynlib never unloads one),
 * so that no mapping is replaced between reading /proc/self/smaps and the
 * madvise. Setting NODEPOOLD_NO_MEM_TRIM (any value) in the environment
 * turns it off, to compare.
 */
#ifndef NP_MEMTRIM_H
#define NP_MEMTRIM_H

/*
 * Trims as above. Returns the kB that left the resident set from the file
 * mappings (their Rss before the trim); 0 when turned off; -1 with errno
 * set when /proc/self/smaps cannot be read (nothing is trimmed then).
 */
long np_mem_trim(void);

/*
 * Trims (np_mem_trim) and logs, at info, what left the resident set: the
 * call each long-running process makes once its start-up is done, and a
 * worker or nodepool-web again once it has re-synced after a lost
 * ZooKeeper connection ("who": what was done, e.g. "provider started").
 */
void np_mem_trim_startup(const char *who);

/*
 * This process's resident set size now, in KiB (/proc/self/statm), where
 * getrusage's ru_maxrss is the peak; -1 when it cannot be read.
 */
long np_mem_rss_kb(void);

#endif
