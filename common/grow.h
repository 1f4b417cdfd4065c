/* Growing an array by doubling, shared by the analysis and the exports. */
#ifndef IOT_GROW_H
#define IOT_GROW_H

#include <stdlib.h>

/* Makes room for `need` elements of `size` bytes in *p (capacity *cap),
 * starting at `first` elements and doubling.  -1 when out of memory, with
 * *p and *cap unchanged. */
static inline int iot_grow(void **p, size_t *cap, size_t need, size_t size, size_t first)
{
    if (need <= *cap)
        return 0;
    size_t n = *cap ? *cap : first;
    while (n < need)
        n *= 2;
    void *q = realloc(*p, n * size);
    if (!q)
        return -1;
    *p = q;
    *cap = n;
    return 0;
}

#endif
