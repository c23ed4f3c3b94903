// The C++ part of tests/arm64/cpuhost.c: a thread whose CPU goes to member
// functions of a class template inlined into the function that loops, so
// that a profile names them (demangled) from the DWARF inline records.
#include <cstdint>
#include <string>

extern "C" volatile int cpu_stop;
extern "C" void cpu_arrived(void);
extern "C" void cpu_name_thread(const char *name);

namespace cxxwork
{

template <typename T> struct Mixer {
	T state;

	__attribute__((always_inline)) inline T rotate(T x, int k)
	{
		return (x << k) | (x >> (64 - k)); // MARK:cxx_rotate
	}

	__attribute__((always_inline)) inline T step(T x)
	{
		state ^= rotate(x, 13) + 0x9e3779b97f4a7c15ull; // MARK:cxx_step
		return state * 5 + rotate(state, 29);
	}

	// The loop itself is inlined: under qemu's emulation a sample's pc is
	// where a block of translated code starts, the head of the loop, so
	// the loop must be in the inlined function for samples to show it.
	__attribute__((always_inline)) inline T run(T x, int n)
	{
		for (int k = 0; k < n; k++) // MARK:cxx_run
			x = step(x);
		return x;
	}
};

__attribute__((noinline)) uint64_t churn(Mixer<uint64_t> &m, uint64_t x)
{
	while (!__atomic_load_n(&cpu_stop, __ATOMIC_RELAXED))
		x = m.run(x, 1000); // MARK:cxx_churn
	return x;
}

} // namespace cxxwork

// A real C++ program has the C++ runtime loaded, and with it the demangler
// the symbolizer uses.
std::string cxx_thread_name = "cxx";

extern "C" void *cpu_cxx_thread(void *arg)
{
	static volatile uint64_t sink;
	cpu_name_thread(cxx_thread_name.c_str());
	cpu_arrived();
	cxxwork::Mixer<uint64_t> m{(uintptr_t)arg + 1};
	sink += cxxwork::churn(m, 12345);
	return nullptr;
}
