// The process-wide switch of programmatic dependent launch (launch.cuh).
#include <atomic>

#include "kernels/kernels.h"
#include "kernels/launch.cuh"

namespace minfer::kernels {
namespace {
std::atomic<bool> g_pdl{false};
std::atomic<int> g_matvec_schedule{-1};
std::atomic<int> g_matvec_lanes{0};
std::atomic<bool> g_matvec_preload{true};
std::atomic<bool> g_matvec_two_types{true};
}  // namespace

bool pdl_enabled() { return g_pdl.load(std::memory_order_relaxed); }
void set_pdl(bool on) { g_pdl.store(on, std::memory_order_relaxed); }
int matvec_schedule() { return g_matvec_schedule.load(std::memory_order_relaxed); }
void set_matvec_schedule(int s) { g_matvec_schedule.store(s, std::memory_order_relaxed); }
int matvec_lanes() { return g_matvec_lanes.load(std::memory_order_relaxed); }
void set_matvec_lanes(int lanes) { g_matvec_lanes.store(lanes, std::memory_order_relaxed); }
bool matvec_preload() { return g_matvec_preload.load(std::memory_order_relaxed); }
void set_matvec_preload(bool on) { g_matvec_preload.store(on, std::memory_order_relaxed); }
bool matvec_two_types() { return g_matvec_two_types.load(std::memory_order_relaxed); }
void set_matvec_two_types(bool on) { g_matvec_two_types.store(on, std::memory_order_relaxed); }

}  // namespace minfer::kernels
