/* The generated workload (gen_workload.py): chains of qsort comparators. */
#pragma once

#ifdef __cplusplus
extern "C" {
#endif

#define WL_MAX_LEVELS 64
#define WL_MAX_SIZE 16

/* How many distinct comparators the generated file has. */
extern const int wl_count;

/* Builds a chain of `levels` qsort levels: level i sorts sizes[i] ints (2..16; 2^k elements put
 * k msort_with_tmp frames under the comparator) with comparator plan[i] (0..wl_count-1), whose
 * first call descends to level i + 1; the comparator of the last level calls leaf(arg).
 * Returns 0 once the leaf ran, -1 on bad arguments. */
int wl_run(int levels, const int* plan, const int* sizes, void (*leaf)(void*), void* arg);

#ifdef __cplusplus
}
#endif
