/*
 * Logging for every nodepoold process.
 *
 * Two tiers, as the house style says: log_warn/log_info/log_debug return;
 * fatal/fatalx log and exit(1) (fatal appends strerror(errno)). Every line is
 * "<UTC ISO time> <level> <tag>: <message>" where tag names the process, e.g.
 * "worker[rax-dfw]", set once by log_init(). Lines go to stderr (systemd and
 * the init script capture it) and are written with one write(2) each, so lines
 * from several processes sharing a log file never interleave. A message
 * cannot forge a line (issue 23): a newline in it continues the line on a
 * tab-indented one, other control characters are written as \xHH.
 */
#ifndef NP_LOG_H
#define NP_LOG_H

#include <stdarg.h>

enum log_level { LOG_LVL_ERROR = 0, LOG_LVL_WARN, LOG_LVL_INFO, LOG_LVL_DEBUG };

/* Set the process tag (copied) and the most verbose level printed. */
void log_init(const char *tag, enum log_level level);
/* Current level; NP_DEBUG=1 in the environment forces LOG_LVL_DEBUG. */
enum log_level log_get_level(void);
void log_set_level(enum log_level level);

void log_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_vlog(enum log_level level, const char *fmt, va_list ap);

/* Log with strerror(errno) appended and exit(1). */
void fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
/* Log and exit(1). */
void fatalx(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

#endif
