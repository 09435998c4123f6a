/* Loads one hwloc XML file with hwloc alone (no placer), then destroys the topology:
 * built with AddressSanitizer by leaks.sh, it shows which inputs hwloc itself leaks on. */
#include <hwloc.h>
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv) {
    FILE *f = fopen(argv[1], "rb");
    if (!f) return 2;
    fseek(f, 0, SEEK_END); long n = ftell(f); fseek(f, 0, SEEK_SET);
    char *buf = malloc(n + 1); fread(buf, 1, n, f); buf[n] = 0; fclose(f);
    hwloc_topology_t t;
    hwloc_topology_init(&t);
    int rc = hwloc_topology_set_xmlbuffer(t, buf, (int)n + 1);
    if (rc == 0) rc = hwloc_topology_load(t);
    printf("set+load: %d\n", rc);
    hwloc_topology_destroy(t);
    free(buf);
    return 0;
}
