/*
 * Working-set trim, once a process's start-up is done (issue 13), and
 * what a process reports of its memory (nodepoolctl status, bench).
 *
 * np_mem_trim() gives the heap's free pages back to the kernel
 * (malloc_trim(0)): the configuration parse, the first ZooKeeper
 * listing and TLS handshake leave freed heap behind that a process would
 * otherwise hold for its whole life.
 *
 * It used to drop file pages too: every private read-only file mapping
 * whose smaps record showed "Anonymous: 0" got madvise(MADV_DONTNEED).
 * That is unsafe (issue 23, finding 8): a relocated read-only mapping
 * (RELRO) whose private pages were swapped out shows Anonymous: 0 as well
 * (the pages count under Swap:), so the trim discarded them and the next
 * access read the file's unrelocated bytes: a crash inside a library, days
 * after start, under memory pressure. What it saved was about 5 MiB of
 * proportional set size (PSS) at 10 providers x 20,000 nodes (47 -> 42
 * MiB): the resident set size (RSS) it lowered counts a shared library
 * page once per process that maps it, and is the wrong measure of the
 * machine's memory; PSS shares such pages out. nodepoolctl status and
 * bench/scale.sh show both.
 *
 * Setting NODEPOOLD_NO_MEM_TRIM (any value) in the environment turns the
 * trim off, to compare.
 */
#ifndef NP_MEMTRIM_H
#define NP_MEMTRIM_H

/*
 * Trims as above. Returns the kB that left the resident set (RSS before
 * minus after, 0 when it grew); 0 when turned off.
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

/*
 * This process's proportional set size now, in KiB (the Pss: line of
 * /proc/self/smaps_rollup): its private pages plus its share of every
 * page it maps with other processes. 0 when it cannot be read.
 */
long np_mem_pss_kb(void);

#endif
