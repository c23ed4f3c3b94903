// The C++ side of tests/heap/heapwork: new/delete (which reach the
// interposed malloc/free through libstdc++), arrays, aligned new, and a
// container growing. Everything is allocated in hw_cxx_widgets.
#include <cstddef>
#include <new>
#include <vector>

namespace
{

struct Widget {
	char payload[200];
	Widget *next;
};

struct alignas(128) Aligned {
	char data[4096];
};

// Never destroyed: what they point to stays reachable until exit.
std::vector<Widget *> &kept = *new std::vector<Widget *>();
std::vector<Aligned *> &kept_aligned = *new std::vector<Aligned *>();

} // namespace

extern "C" __attribute__((noinline)) void
hw_cxx_widgets(unsigned long long *alloc, unsigned long long *inuse)
{
	for (int i = 0; i < 100000; i++) {
		Widget *w = new Widget();
		w->payload[0] = 1;
		if (i % 4 == 0)
			delete w;
		else
			kept.push_back(w);
	}
	*alloc += 100000ull * sizeof(Widget);
	*inuse += 75000ull * sizeof(Widget);
	for (int i = 0; i < 1000; i++) {
		Aligned *a = new Aligned();
		kept_aligned.push_back(a);
	}
	*alloc += 1000ull * sizeof(Aligned);
	*inuse += 1000ull * sizeof(Aligned);
	char *arr = new char[1 << 20];
	arr[0] = 1;
	delete[] arr;
	*alloc += 1 << 20;
}

extern "C" void hw_cxx_run(unsigned long long *alloc, unsigned long long *inuse)
{
	// The vectors' own storage is reserved outside the measured function.
	kept.reserve(100000);
	kept_aligned.reserve(1000);
	hw_cxx_widgets(alloc, inuse);
}

// A new that cannot be served throws std::bad_alloc through whatever
// operator new the process resolves (pullprof's, forwarding): 1 when it
// arrives here.
extern "C" int hw_cxx_bad_alloc(void)
{
	try {
		volatile size_t huge = ~static_cast<size_t>(0) / 2;
		// Kept where the compiler cannot see it unused: a new and
		// delete pair it can see through may be left out (C++14).
		static char *volatile sink;
		sink = new char[huge];
		sink[0] = 1;
	} catch (const std::bad_alloc &) {
		return 1;
	}
	return 0;
}
