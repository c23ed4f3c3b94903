/*
 * pullprof-convert: a legacy gperftools CPU profile in, a gzipped pprof
 * profile out, symbolized against the binaries the profile's maps text
 * names, where they still exist. Exit codes: 0 converted, 1 the input could
 * not be read or is no well-formed profile (or the output could not be
 * written), 2 usage.
 */
#include <dlfcn.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "profile/legacy_read.h"
#include "profile/pprof.h"
#include "symbols/symbols.h"
#include "util/buf.h"

#define PROG "pullprof-convert"

static const char usage_text[] =
    "Usage: " PROG " [-q] [-o OUTPUT] INPUT\n"
    "Try '" PROG " --help' for more information.\n";

static const char help_text[] =
    "NAME\n"
    "    " PROG " - convert a gperftools CPU profile to a pprof profile\n"
    "\n"
    "SYNOPSIS\n"
    "    " PROG " [-q] [-o OUTPUT] INPUT\n"
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
    "OPTIONS\n"
    "    -o, --output=OUTPUT\n"
    "        Write the profile to OUTPUT (conventionally NAME.pb.gz) instead\n"
    "        of standard output. '-' is standard output.\n"
    "    -q, --quiet\n"
    "        No warnings about binaries that cannot be symbolized.\n"
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
    "        " PROG " -o cpu.pb.gz -\n";

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

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
	    {"output", required_argument, NULL, 'o'},
	    {"quiet", no_argument, NULL, 'q'},
	    {"help", no_argument, NULL, 'h'},
	    {"version", no_argument, NULL, 'V'},
	    {NULL, 0, NULL, 0},
	};
	const char *output = "-";
	int c;

	while ((c = getopt_long(argc, argv, "o:qhV", longopts, NULL)) != -1) {
		switch (c) {
		case 'o': output = optarg; break;
		case 'q': quiet = 1; break;
		case 'h': fputs(help_text, stdout); return 0;
		case 'V':
			printf(PROG " (pullprof) %s\n", PACKAGE_VERSION);
			return 0;
		default: fputs(usage_text, stderr); return 2;
		}
	}
	if (argc - optind != 1) {
		fprintf(stderr, PROG ": %s\n%s",
		        argc - optind ? "one INPUT file, please"
		                      : "missing INPUT file ('-' for stdin)",
		        usage_text);
		return 2;
	}
	const char *input = argv[optind];
	const char *in_name = strcmp(input, "-") == 0 ? "<stdin>" : input;
	int to_stdout = strcmp(output, "-") == 0;
	if (to_stdout && isatty(STDOUT_FILENO)) {
		fprintf(stderr,
		        PROG ": not writing a binary profile to a terminal; "
		             "use -o FILE or a redirection\n%s",
		        usage_text);
		return 2;
	}

	/* Read and check the input before the output is touched. */
	FILE *in = strcmp(input, "-") == 0 ? stdin : fopen(input, "rb");
	char *data = NULL;
	size_t len = 0;
	int rc;
	if (!in) {
		fprintf(stderr, PROG ": %s: %s\n", input, strerror(errno));
		return 1;
	}
	rc = read_all(in, &data, &len);
	if (in != stdin)
		fclose(in);
	if (rc) {
		fprintf(stderr, PROG ": %s: %s\n", in_name, strerror(-rc));
		return 1;
	}

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

	FILE *f = to_stdout ? stdout : fopen(output, "wb");
	if (!f) {
		fprintf(stderr, PROG ": %s: %s\n", output, strerror(errno));
		pp_buf_free(&out);
		return 1;
	}
	rc = write_all(f, out.data, out.len);
	if (!to_stdout && fclose(f) != 0 && rc == 0)
		rc = -(errno ? errno : EIO);
	pp_buf_free(&out);
	if (rc) {
		fprintf(stderr, PROG ": %s: %s\n",
		        to_stdout ? "<stdout>" : output, strerror(-rc));
		if (!to_stdout)
			unlink(output);
		return 1;
	}
	return 0;
}
