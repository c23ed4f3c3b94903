/* Messages for people.
 * Context: agent.
 */
#ifndef PP_ERROR_H
#define PP_ERROR_H

/* Write one line "pullprof[pid]: <message>" to stderr in a single write. */
void pp_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
