/*
 * envhost: a program that defines getenv, setenv, unsetenv and putenv
 * itself, as bash does, for test_hostile_env.py; preloaded with
 * libpullprof (it knows nothing of it). Its variables live in a table of
 * its own, empty until main() fills it from its envp (bash's is created by
 * the first setenv and filled by main() too): before main, its getenv
 * knows nothing, and what its setenv is given never reaches the process
 * environment.
 *
 * Prints, one line each on stdout: "env NAME=VALUE" for every PULLPROF_*
 * variable of its table (what it would give the programs it runs), then
 * "ready"; exits when stdin ends.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_VARS 512

static char *table[MAX_VARS];
static int nvars;

static int find(const char *name, size_t n)
{
	for (int i = 0; i < nvars; i++)
		if (strncmp(table[i], name, n) == 0 && table[i][n] == '=')
			return i;
	return -1;
}

char *getenv(const char *name)
{
	int i = find(name, strlen(name));
	return i < 0 ? NULL : table[i] + strlen(name) + 1;
}

static int put(char *entry, size_t n)
{
	int i = find(entry, n);
	if (i >= 0) {
		table[i] = entry;
		return 0;
	}
	if (nvars == MAX_VARS)
		return -1;
	table[nvars++] = entry;
	return 0;
}

int setenv(const char *name, const char *value, int overwrite)
{
	size_t n = strlen(name);
	if (!overwrite && find(name, n) >= 0)
		return 0;
	/* Not malloc: the preloaded library may be inside it. */
	static char pool[1 << 16];
	static size_t used;
	size_t need = n + strlen(value) + 2;
	if (used + need > sizeof pool)
		return -1;
	char *e = pool + used;
	used += need;
	snprintf(e, need, "%s=%s", name, value);
	return put(e, n);
}

int unsetenv(const char *name)
{
	int i = find(name, strlen(name));
	if (i >= 0)
		table[i] = table[--nvars];
	return 0;
}

int putenv(char *entry)
{
	char *eq = strchr(entry, '=');
	return eq ? put(entry, (size_t)(eq - entry)) : unsetenv(entry);
}

int main(int argc, char **argv, char **envp)
{
	(void)argc;
	(void)argv;
	for (char **e = envp; *e; e++) {
		char *eq = strchr(*e, '=');
		if (eq && find(*e, (size_t)(eq - *e)) < 0)
			put(*e, (size_t)(eq - *e));
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	for (int i = 0; i < nvars; i++)
		if (strncmp(table[i], "PULLPROF_", 9) == 0)
			printf("env %s\n", table[i]);
	printf("ready\n");
	char line[256];
	while (fgets(line, sizeof line, stdin))
		;
	return 0;
}
