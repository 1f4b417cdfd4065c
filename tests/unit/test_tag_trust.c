/* Whose iotrace tags a brick believes (serverhooks/tag_trust.c): a peer
 * "ADDR:PORT" is a root client only with a numeric address and a port below
 * the privileged limit; Unix socket paths that look like one, names, junk
 * and port 0 are not; an unverified job always ends in the whole suffix. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "tag_trust.h"

static void test_peers(void **state)
{
    (void)state;
    assert_true(iotrace_peer_privileged("127.0.0.1:1023", 1024));
    assert_true(iotrace_peer_privileged("10.1.2.3:1", 1024));
    assert_true(iotrace_peer_privileged("::1:1021", 1024));
    assert_true(iotrace_peer_privileged("fe80::1:2:1000", 1024));
    /* GlusterFS's clients bind below 49152 by default: not root's. */
    assert_false(iotrace_peer_privileged("127.0.0.1:49149", 1024));
    assert_false(iotrace_peer_privileged("127.0.0.1:1024", 1024));
    assert_false(iotrace_peer_privileged("127.0.0.1:0", 1024));
    assert_false(iotrace_peer_privileged("127.0.0.1:1023", 0));
    assert_false(iotrace_peer_privileged("127.0.0.1:1023", 1000));
    assert_false(iotrace_peer_privileged("/run/forge:80", 1024));
    assert_false(iotrace_peer_privileged("forge.example:22", 1024));
    assert_false(iotrace_peer_privileged("127.0.0.1:22x", 1024));
    assert_false(iotrace_peer_privileged("127.0.0.1:-22", 1024));
    assert_false(iotrace_peer_privileged("127.0.0.1:", 1024));
    assert_false(iotrace_peer_privileged(":22", 1024));
    assert_false(iotrace_peer_privileged("22", 1024));
    assert_false(iotrace_peer_privileged("", 1024));
    assert_false(iotrace_peer_privileged(NULL, 1024));
    assert_false(iotrace_peer_privileged("127.0.0.1:99999999999999999999", 1024));
}

static void test_unverified_job(void **state)
{
    (void)state;
    char out[128];
    iotrace_unverified_job("job-1", out, sizeof out);
    assert_string_equal(out, "job-1" IOTRACE_UNVERIFIED_SUFFIX);
    char long_job[300];
    memset(long_job, 'j', sizeof long_job - 1);
    long_job[sizeof long_job - 1] = '\0';
    iotrace_unverified_job(long_job, out, sizeof out);
    assert_int_equal(strlen(out), sizeof out - 1);
    assert_string_equal(out + strlen(out) - strlen(IOTRACE_UNVERIFIED_SUFFIX),
                        IOTRACE_UNVERIFIED_SUFFIX);
    char tiny[4] = "xyz";
    iotrace_unverified_job("job", tiny, sizeof tiny);
    assert_string_equal(tiny, "");
}

static void test_privileged_ports(void **state)
{
    (void)state;
    unsigned want = 1024, v;
    FILE *f = fopen("/proc/sys/net/ipv4/ip_unprivileged_port_start", "r");
    if (f) {
        if (fscanf(f, "%u", &v) == 1 && v < want)
            want = v;
        fclose(f);
    }
    assert_int_equal(iotrace_privileged_ports(), want);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_peers),
        cmocka_unit_test(test_unverified_job),
        cmocka_unit_test(test_privileged_ports),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
