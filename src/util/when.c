/*
 * Points in time and durations from text (when.h). Every character is
 * checked: a value with anything after it is refused, not truncated; and
 * every product and sum is checked too: a value past what 64-bit
 * nanoseconds hold is refused, never wrapped into another one.
 * Context: agent.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "util/when.h"

#define NS 1000000000ll

/* Digits at *p (at least min, at most max of them) into *v. */
static int digits(const char **p, int min, int max, int64_t *v)
{
	int n = 0;
	int64_t x = 0;
	while (n < max && (*p)[n] >= '0' && (*p)[n] <= '9') {
		x = x * 10 + ((*p)[n] - '0');
		n++;
	}
	if (n < min)
		return -1;
	*p += n;
	*v = x;
	return 0;
}

/* ".ddd" at *p (optional) as nanoseconds. */
static int fraction(const char **p, int64_t *ns)
{
	*ns = 0;
	if (**p != '.')
		return 0;
	(*p)++;
	int64_t scale = NS / 10;
	int n = 0;
	while (**p >= '0' && **p <= '9') {
		if (scale) {
			*ns += (**p - '0') * scale;
			scale /= 10;
		}
		(*p)++;
		n++;
	}
	return n ? 0 : -1;
}

/* Seconds since the epoch and a fraction as nanoseconds: -ERANGE when
 * before 1970 or past 2262-04-11T23:47:16.854775807Z (INT64_MAX ns). */
static int seconds_ns(int64_t sec, int64_t frac, int64_t *out)
{
	int64_t ns;
	if (sec < 0 || __builtin_mul_overflow(sec, NS, &ns) ||
	    __builtin_add_overflow(ns, frac, &ns))
		return -ERANGE;
	*out = ns;
	return 0;
}

/* Days since 1970-01-01 of a proleptic Gregorian date. */
static int64_t days_from_civil(int64_t y, int64_t m, int64_t d)
{
	y -= m <= 2;
	int64_t era = (y >= 0 ? y : y - 399) / 400;
	int64_t yoe = y - era * 400;
	int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
	int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	return era * 146097 + doe - 719468;
}

static int days_in_month(int64_t y, int64_t m)
{
	static const int d[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
	int leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
	return d[m - 1] + (m == 2 && leap);
}

static int rfc3339(const char *s, int64_t *out)
{
	const char *p = s;
	int64_t y, mo, d, h, mi, sec, frac, oh = 0, om = 0;
	if (digits(&p, 4, 4, &y) || *p++ != '-' || digits(&p, 2, 2, &mo) ||
	    *p++ != '-' || digits(&p, 2, 2, &d) ||
	    (*p != 'T' && *p != 't' && *p != ' '))
		return -1;
	p++;
	if (digits(&p, 2, 2, &h) || *p++ != ':' || digits(&p, 2, 2, &mi) ||
	    *p++ != ':' || digits(&p, 2, 2, &sec) || fraction(&p, &frac))
		return -1;
	int sign = 0;
	if (*p == 'Z' || *p == 'z')
		p++;
	else if (*p == '+' || *p == '-') {
		sign = *p++ == '-' ? -1 : 1;
		if (digits(&p, 2, 2, &oh) || *p++ != ':' ||
		    digits(&p, 2, 2, &om) || oh > 23 || om > 59)
			return -1;
	} else
		return -1;
	if (*p || mo < 1 || mo > 12 || d < 1 || d > days_in_month(y, mo) ||
	    h > 23 || mi > 59 || sec > 60)
		return -1;
	/* Years 0000..9999 keep these in seconds far inside int64_t. */
	int64_t t = days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 +
	            (sec == 60 ? 59 : sec); /* a leap second: its last second */
	t -= sign * (oh * 3600 + om * 60);
	return seconds_ns(t, frac, out);
}

int pp_when_parse(const char *s, int64_t *ns, char *err, size_t errlen)
{
	const char *p = s;
	int64_t sec, frac;
	int rc = -EINVAL;
	if (s && strchr(s, '-'))
		rc = rfc3339(s, ns);
	/* Unix seconds: up to 12 digits (beyond the year 33000: checked
	 * below). */
	else if (s && !digits(&p, 1, 12, &sec) && !fraction(&p, &frac) && !*p)
		rc = seconds_ns(sec, frac, ns);
	if (rc == 0)
		return 0;
	if (rc == -ERANGE) {
		snprintf(err, errlen,
		         "\"%.40s\" is not a time between 1970-01-01T00:00:00Z "
		         "and 2262-04-11T23:47:16Z (what 64-bit nanoseconds "
		         "since 1970 hold)",
		         s);
		return -ERANGE;
	}
	snprintf(err, errlen,
	         "\"%.40s\" is not a time: Unix seconds (1764230400 or "
	         "1764230400.25) or RFC 3339 (2026-11-27T08:00:00Z)",
	         s ? s : "");
	return -EINVAL;
}

int pp_duration_parse(const char *s, int64_t max_ns, int64_t *ns, char *err,
                      size_t errlen)
{
	const char *p = s;
	int64_t whole, frac, unit = NS;
	if (!s || digits(&p, 1, 9, &whole) || fraction(&p, &frac))
		goto bad;
	if (*p == 's')
		p++;
	else if (*p == 'm')
		unit = 60 * NS, p++;
	else if (*p == 'h')
		unit = 3600 * NS, p++;
	if (*p)
		goto bad;
	/* whole < 10^9 and unit <= 3600 s: the product may pass INT64_MAX
	 * (5124096h, 307445735m); the fraction's part stays below unit. */
	int64_t v;
	if (__builtin_mul_overflow(whole, unit, &v) ||
	    __builtin_add_overflow(
	        v, (int64_t)((double)frac * ((double)unit / NS)), &v) ||
	    v > max_ns) {
		snprintf(err, errlen, "\"%.40s\" is longer than %lld s", s,
		         (long long)(max_ns / NS));
		return -ERANGE;
	}
	*ns = v;
	if (*ns <= 0) {
		snprintf(err, errlen, "\"%.40s\": a duration above 0 is needed",
		         s);
		return -ERANGE;
	}
	return 0;
bad:
	snprintf(err, errlen,
	         "\"%.40s\" is not a duration: seconds (300, 2.5) or with a "
	         "unit (90s, 5m, 1h)",
	         s ? s : "");
	return -EINVAL;
}
