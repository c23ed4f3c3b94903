/*
 * Counts since the agent started, or their change over ?seconds=N
 * (counts.h): one implementation of the start/make/free triple.
 * Context: agent.
 */
#include "profile/counts.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct counts_job {
	const struct pp_counts *c;
	unsigned seconds;
	void *start;                      /* begin's state */
	struct pp_profile *start_profile; /* snapshot's */
	char query[];
};

int pp_counts_start(struct pp_job *job, const void *query, char *err,
                    size_t errlen)
{
	const struct pp_counts *c = pp_job_producer(job)->counts;
	int rc = c->check ? c->check(query, err, errlen) : 0;
	if (rc)
		return rc;
	struct counts_job *j = calloc(1, sizeof *j + c->query_size);
	if (!j) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	j->c = c;
	memcpy(j->query, query, c->query_size);
	j->seconds = pp_job_seconds(job);
	pp_job_set_data(job, j);
	if (!j->seconds)
		return 0;
	if (c->begin)
		return c->begin(query, &j->start, err, errlen);
	rc = c->snapshot(query, &j->start_profile);
	if (rc)
		snprintf(err, errlen, "%s",
		         rc == -ENOMEM ? "out of memory" : strerror(-rc));
	return rc;
}

int pp_counts_make(struct pp_job *job, struct pp_profile **out)
{
	struct counts_job *j = pp_job_data(job);
	const struct pp_counts *c = j->c;
	struct pp_profile *p;
	int rc;
	if (c->finish) {
		rc = c->finish(job, j->query, j->seconds ? j->start : NULL, &p);
	} else {
		rc = c->snapshot(j->query, &p);
		if (!rc && j->seconds) {
			struct pp_profile *end = p;
			rc =
			    pp_job_window_delta(job, end, j->start_profile, &p);
		}
	}
	if (rc)
		return rc;
	if (c->note)
		c->note(j->query, j->seconds != 0, p);
	*out = p;
	return 0;
}

void pp_counts_free(void *data)
{
	struct counts_job *j = data;
	if (!j)
		return;
	if (j->start && j->c->free_start)
		j->c->free_start(j->start);
	pp_profile_free(j->start_profile);
	free(j);
}
