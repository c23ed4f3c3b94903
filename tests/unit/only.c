/*
 * PP_ONLY=pattern: a unit-test program runs only the tests whose names
 * match it (cmocka's pattern: * and ? as in a shell), as PP_ONLY picks
 * tests in an integration test file. Linked into every unit-test program
 * (Makefile.am, UNIT_ONLY); it runs before their main.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

__attribute__((constructor)) static void pp_unit_only(void)
{
	const char *only = getenv("PP_ONLY");
	if (only && *only)
		cmocka_set_test_filter(only);
}
