/*
 * pullprof-convert: a legacy gperftools CPU profile in, a gzipped pprof
 * profile out, symbolized against the binaries the profile's maps text
 * names, where they still exist; or, with --merge, the pprof profiles of
 * several processes in, one profile out, each sample labelled with its
 * pid. Exit codes: 0 converted, 1 the input could not be read or is no
 * well-formed profile (or the output could not be written), 2 usage.
 * Context: agent.
 */
#include <dlfcn.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "profile/legacy_read.h"
#include "profile/merge.h"
#include "profile/pprof.h"
#include "symbols/symbols.h"
#include "util/buf.h"

#define PROG "pullprof-convert"

static const char usage_text[] =
    "Usage: " PROG " [-q] [-o OUTPUT] INPUT\n"
    "       " PROG " --merge [-q] [--max-mb=MIB] [--note=TEXT]... "
    "[-o OUTPUT] PID=FILE...\n"
    "Try '" PROG " --help' for more information.\n";

static const char help_text[] =
    "NAME\n"
    "    " PROG " - convert a gperftools CPU profile to a pprof profile,\n"
    "    or merge the pprof profiles of several processes\n"
    "\n"
    "SYNOPSIS\n"
    "    " PROG " [-q] [-o OUTPUT] INPUT\n"
    "    " PROG " --merge [-q] [--max-mb=MIB] [--note=TEXT]... [-o OUTPUT]\n"
    "        PID=FILE...\n"
    "\n"
    "DESCRIPTION\n"
    "    Reads INPUT, a CPU profile in the legacy binary format that\n"
    "    gperftools' profiler (libprofiler, CPUPROFILE=...) writes and that\n"
    "    pullprof serves with ?format=legacy, and writes it as a gzipped\n"
    "    perftools.profiles.Profile protobuf, which go tool pprof, Parca and\n"
    "    Pyroscope read.\n"
    "\n"
    "    The profile has the sample types samples/count and cpu/nanoseconds\n"
    "    (count times the sampling period), the period type cpu/nanoseconds\n"
    "    and the file's sampling period. The first PC of each stack is the\n"
    "    sampled one, the others are return addresses, as in pullprof's own\n"
    "    profiles.\n"
    "\n"
    "    Addresses are symbolized (functions, inlined functions, file:line)\n"
    "    from the binaries that the profile's list of mapped objects names,\n"
    "    with their DWARF debug information or separate debug files under\n"
    "    /usr/lib/debug when present, else their ELF symbol tables. A binary\n"
    "    that no longer exists, or was replaced while the program ran, leaves\n"
    "    its addresses unsymbolized, with a warning on standard error. Run\n"
    "    the converter where the profiled binaries are. Frames in the vDSO\n"
    "    ([vdso]) stay addresses too: it is no file.\n"
    "\n"
    "    Both word sizes (64- and 32-bit programs) and both byte orders are\n"
    "    read.\n"
    "\n"
    "    With --merge, each FILE is a pprof profile (gzipped or not) of the\n"
    "    process PID, as its agent answers, and the output is one profile\n"
    "    in which every sample carries the string label pid=PID (replacing\n"
    "    a pid label it had). Samples are not summed across processes;\n"
    "    mappings and locations stay per process, functions with the same\n"
    "    name, system name, file and start line are shared. A FILE whose\n"
    "    sample types or period type differ from the first FILE's is left\n"
    "    out, with a comment in the profile saying why. time_nanos is the\n"
    "    earliest, duration_nanos the longest; the period, default sample\n"
    "    type and drop/keep frames are the first FILE's; comments are all\n"
    "    of them, each once, then the notes. Nothing is symbolized: the\n"
    "    profiles are taken as they are.\n"
    "\n"
    "OPTIONS\n"
    "    -o, --output=OUTPUT\n"
    "        Write the profile to OUTPUT (conventionally NAME.pb.gz) instead\n"
    "        of standard output. '-' is standard output.\n"
    "    -q, --quiet\n"
    "        No warnings (binaries that cannot be symbolized; with --merge,\n"
    "        profiles left out and samples past --max-mb).\n"
    "    --merge\n"
    "        Merge PID=FILE... as above. FILE may be '-' (standard input)\n"
    "        once.\n"
    "    --max-mb=MIB\n"
    "        With --merge: the merged tables' memory bound, as\n"
    "        PULLPROF_MAX_PROFILE_MB bounds one process's profile (default:\n"
    "        none). Past it, further samples are charged, summed per pid,\n"
    "        to the frame\n"
    "        " PP_PROFILE_LIMIT_FRAME "\n"
    "        and a comment says how many.\n"
    "    --note=TEXT\n"
    "        With --merge: add TEXT to the profile's comments (repeatable).\n"
    "    -h, --help\n"
    "        This text.\n"
    "    -V, --version\n"
    "        The version of pullprof.\n"
    "\n"
    "    INPUT is a file name, or '-' for standard input.\n"
    "\n"
    "EXIT STATUS\n"
    "    0   converted\n"
    "    1   INPUT could not be read or is not a well-formed profile (the\n"
    "        message names the file and the byte offset of the problem),\n"
    "        or OUTPUT could not be written\n"
    "    2   wrong usage\n"
    "\n"
    "EXAMPLES\n"
    "    CPUPROFILE=/tmp/app.prof ./app\n"
    "    " PROG " -o app.pb.gz /tmp/app.prof\n"
    "    go tool pprof -top app.pb.gz\n"
    "\n"
    "    curl -s 'http://host:port/debug/pprof/profile?seconds=10&"
    "format=legacy' |\n"
    "        " PROG " -o cpu.pb.gz -\n"
    "\n"
    "    " PROG " --merge -o all.pb.gz 101=w1.pb.gz 102=w2.pb.gz\n"
    "    go tool pprof -tagfocus=pid=101 -top all.pb.gz\n";

static int quiet;

static int read_all(FILE *f, char **data, size_t *len)
{
	struct pp_buf b = {0};
	char chunk[65536];
	size_t n;

	while ((n = fread(chunk, 1, sizeof chunk, f)) > 0)
		pp_buf_append(&b, chunk, n);
	if (ferror(f) || b.failed) {
		int e = ferror(f) ? errno : ENOMEM;
		pp_buf_free(&b);
		return e ? -e : -EIO;
	}
	*data = pp_buf_take(&b, len);
	return *data ? 0 : -ENOMEM;
}

/* Say which binaries that samples fall in cannot be symbolized. */
static void warn_unsymbolized(const char *input, const struct pp_legacy *l)
{
	const struct pp_mappings *m = &l->maps;
	unsigned char *hit = calloc(m->n + 1, 1);
	size_t outside = 0;

	if (!hit)
		return;
	for (const struct pp_sample *s = l->profile->first; s; s = s->next) {
		for (uint32_t i = 0; i < s->depth; i++) {
			const struct pp_mapping *mp =
			    pp_mappings_find(m, s->pcs[i]);
			if (mp)
				hit[mp - m->v] = 1;
			else
				outside++;
		}
	}
	if (m->n == 0)
		fprintf(stderr,
		        PROG
		        ": warning: %s: no executable mappings in the "
		        "list of mapped objects: the profile has addresses "
		        "only\n",
		        input);
	else if (outside)
		fprintf(stderr,
		        PROG ": warning: %s: %zu PCs are outside every listed "
		             "mapping and stay unsymbolized\n",
		        input, outside);
	for (size_t i = 0; i < m->n; i++) {
		const struct pp_mapping *mp = &m->v[i];
		int dup = 0;
		if (!hit[i] || !mp->is_file)
			continue;
		for (size_t k = 0; k < i && !dup; k++)
			dup = hit[k] && strcmp(m->v[k].path, mp->path) == 0;
		if (dup)
			continue;
		if (mp->deleted)
			fprintf(stderr,
			        PROG
			        ": warning: %s was deleted or replaced "
			        "while the profiled program ran: its addresses "
			        "stay unsymbolized\n",
			        mp->path);
		else if (access(mp->path, R_OK) != 0)
			fprintf(stderr,
			        PROG ": warning: %s: %s: its addresses stay "
			             "unsymbolized\n",
			        mp->path, strerror(errno));
	}
	free(hit);
}

static int write_all(FILE *f, const char *data, size_t len)
{
	if (fwrite(data, 1, len, f) != len)
		return -(errno ? errno : EIO);
	return fflush(f) ? -(errno ? errno : EIO) : 0;
}

/* Write the profile to output ('-': stdout): the exit status. */
static int emit(const char *output, const char *data, size_t len)
{
	int to_stdout = strcmp(output, "-") == 0;
	FILE *f = to_stdout ? stdout : fopen(output, "wb");
	if (!f) {
		fprintf(stderr, PROG ": %s: %s\n", output, strerror(errno));
		return 1;
	}
	int rc = write_all(f, data, len);
	if (!to_stdout && fclose(f) != 0 && rc == 0)
		rc = -(errno ? errno : EIO);
	if (rc) {
		fprintf(stderr, PROG ": %s: %s\n",
		        to_stdout ? "<stdout>" : output, strerror(-rc));
		if (!to_stdout)
			unlink(output);
		return 1;
	}
	return 0;
}

/* Read a file ('-': stdin): 0, or the exit status after a message. */
static int read_file(const char *input, char **data, size_t *len)
{
	const char *name = strcmp(input, "-") == 0 ? "<stdin>" : input;
	FILE *in = strcmp(input, "-") == 0 ? stdin : fopen(input, "rb");
	if (!in) {
		fprintf(stderr, PROG ": %s: %s\n", input, strerror(errno));
		return 1;
	}
	int rc = read_all(in, data, len);
	if (in != stdin)
		fclose(in);
	if (rc) {
		fprintf(stderr, PROG ": %s: %s\n", name, strerror(-rc));
		return 1;
	}
	return 0;
}

/* --merge PID=FILE...: the exit status. */
static int merge(int n, char **args, const char *output,
                 const struct pp_merge_opts *opts)
{
	struct pp_merge_part *parts = calloc((size_t)n, sizeof *parts);
	char **data = calloc((size_t)n, sizeof *data);
	int status = parts && data ? 0 : 1, stdin_used = 0;
	char why[512];

	/* Every argument checked before any file is read. */
	for (int i = 0; i < n && !status; i++) {
		char *eq = strchr(args[i], '='), *end;
		errno = 0;
		long pid = strtol(args[i], &end, 10);
		if (!eq || end != eq || eq == args[i] || errno || pid <= 0 ||
		    pid > INT_MAX || !eq[1]) {
			fprintf(stderr,
			        PROG ": '%s': PID=FILE expected, PID a "
			             "positive number\n%s",
			        args[i], usage_text);
			status = 2;
		} else if (strcmp(eq + 1, "-") == 0 && stdin_used++) {
			fprintf(stderr,
			        PROG ": standard input ('-') can be "
			             "read once\n%s",
			        usage_text);
			status = 2;
		}
		parts[i].pid = (int)pid;
	}
	for (int i = 0; i < n && !status; i++) {
		const char *file = strchr(args[i], '=') + 1;
		status = read_file(file, &data[i], &parts[i].len);
		parts[i].data = data[i];
		if (status)
			break;
		/* Each file checked first: the message then names it. */
		struct pp_pprof_decoded d;
		int rc =
		    pp_pprof_read(data[i], parts[i].len, &d, why, sizeof why);
		pp_pprof_read_free(&d);
		if (rc) {
			fprintf(stderr, PROG ": %s (pid %d): %s\n",
			        strcmp(file, "-") ? file : "<stdin>",
			        parts[i].pid,
			        rc == -EINVAL ? why : strerror(-rc));
			status = 1;
		}
	}
	char *out = NULL;
	size_t len = 0;
	struct pp_merge_stats st;
	struct pp_merge_opts o = *opts;
	o.stats = &st;
	if (!status) {
		int rc = pp_merge_pprof(parts, (size_t)n, &o, &out, &len, why,
		                        sizeof why);
		if (rc) {
			fprintf(stderr, PROG ": merging: %s\n", why);
			status = 1;
		}
	}
	if (!status && !quiet && st.left_out)
		fprintf(stderr,
		        PROG ": warning: %zu of %d profiles left out: their "
		             "sample types differ from the first's (the "
		             "profile's comments say how)\n",
		        st.left_out, n);
	if (!status && !quiet && st.over_limit)
		fprintf(stderr,
		        PROG ": warning: %llu samples past --max-mb went to "
		             "%s\n",
		        (unsigned long long)st.over_limit,
		        PP_PROFILE_LIMIT_FRAME);
	if (!status)
		status = emit(output, out, len);
	for (int i = 0; data && i < n; i++)
		free(data[i]);
	free(data);
	free(parts);
	free(out);
	return status;
}

int main(int argc, char **argv)
{
	enum { OPT_MERGE = 256, OPT_MAX_MB, OPT_NOTE };
	static const struct option longopts[] = {
	    {"output", required_argument, NULL, 'o'},
	    {"quiet", no_argument, NULL, 'q'},
	    {"help", no_argument, NULL, 'h'},
	    {"version", no_argument, NULL, 'V'},
	    {"merge", no_argument, NULL, OPT_MERGE},
	    {"max-mb", required_argument, NULL, OPT_MAX_MB},
	    {"note", required_argument, NULL, OPT_NOTE},
	    {NULL, 0, NULL, 0},
	};
	const char *output = "-";
	const char **notes = NULL;
	struct pp_merge_opts mopts = {0, NULL, 0, NULL};
	int c, merging = 0, merge_only = 0, status = -1;

	/* status >= 0: exit with it (after the notes are freed). */
	while (status < 0 &&
	       (c = getopt_long(argc, argv, "o:qhV", longopts, NULL)) != -1) {
		char *end;
		unsigned long long mb;
		switch (c) {
		case 'o': output = optarg; break;
		case 'q': quiet = 1; break;
		case 'h':
			fputs(help_text, stdout);
			status = 0;
			break;
		case 'V':
			printf(PROG " (pullprof) %s\n", PACKAGE_VERSION);
			status = 0;
			break;
		case OPT_MERGE: merging = 1; break;
		case OPT_MAX_MB:
			errno = 0;
			mb = strtoull(optarg, &end, 10);
			if (errno || end == optarg || *end ||
			    optarg[0] == '-' || mb == 0 || mb > 1u << 20) {
				fprintf(stderr,
				        PROG ": --max-mb=%s: a number of MiB "
				             "from 1 to 1048576, please\n%s",
				        optarg, usage_text);
				status = 2;
			}
			mopts.max_bytes = (size_t)mb << 20;
			merge_only = 1;
			break;
		case OPT_NOTE:
			/* At most one per argument. */
			if (!notes &&
			    !(notes = calloc((size_t)argc, sizeof *notes))) {
				fprintf(stderr, PROG ": %s\n",
				        strerror(ENOMEM));
				status = 1;
				break;
			}
			notes[mopts.nnotes++] = optarg;
			mopts.notes = notes;
			merge_only = 1;
			break;
		default:
			fputs(usage_text, stderr);
			status = 2;
			break;
		}
	}
	if (status < 0 && merge_only && !merging) {
		fprintf(stderr,
		        PROG ": --max-mb and --note go with --merge\n%s",
		        usage_text);
		status = 2;
	}
	if (status < 0 && (merging ? argc == optind : argc - optind != 1)) {
		fprintf(stderr, PROG ": %s\n%s",
		        merging         ? "missing PID=FILE arguments"
		        : argc - optind ? "one INPUT file, please"
		                        : "missing INPUT file ('-' for stdin)",
		        usage_text);
		status = 2;
	}
	if (status < 0 && strcmp(output, "-") == 0 && isatty(STDOUT_FILENO)) {
		fprintf(stderr,
		        PROG ": not writing a binary profile to a terminal; "
		             "use -o FILE or a redirection\n%s",
		        usage_text);
		status = 2;
	}
	if (status < 0 && merging)
		status = merge(argc - optind, argv + optind, output, &mopts);
	free(notes);
	if (status >= 0)
		return status;

	/* Read and check the input before the output is touched. */
	const char *input = argv[optind];
	const char *in_name = strcmp(input, "-") == 0 ? "<stdin>" : input;
	char *data = NULL;
	size_t len = 0;
	int rc;
	if (read_file(input, &data, &len))
		return 1;

	struct pp_legacy l;
	char why[256];
	rc = pp_legacy_read(data, len, &l, why, sizeof why);
	free(data);
	if (rc) {
		fprintf(stderr, PROG ": %s: %s\n", in_name,
		        rc == -EINVAL ? why : strerror(-rc));
		return 1;
	}
	if (!quiet)
		warn_unsymbolized(in_name, &l);

	/* C++ names are demangled with the C++ runtime's demangler, which the
	 * symbolizer finds in the process: load it (this tool is C). */
	dlopen("libstdc++.so.6", RTLD_NOW | RTLD_GLOBAL);

	struct pp_buf out = {0};
	struct pp_symtab *st = NULL;
	rc = pp_mappings_read_build_ids(&l.maps);
	if (rc == 0) {
		st = pp_symtab_new(&l.maps);
		rc = st ? pp_pprof_render(l.profile, st, 6, &out) : -ENOMEM;
	}
	pp_symtab_free(st);
	pp_legacy_free(&l);
	if (rc) {
		fprintf(stderr, PROG ": %s: %s\n", in_name, strerror(-rc));
		pp_buf_free(&out);
		return 1;
	}
	status = emit(output, out.data, out.len);
	pp_buf_free(&out);
	return status;
}
