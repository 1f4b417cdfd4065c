/* The clock datagrams (common/clockudp.h): what one key seals only that key
 * opens, a changed byte or a wrong length is refused, and a datagram sent
 * over loopback comes back with the kernel's receive time, on this
 * process's clock. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <netinet/in.h>
#include <arpa/inet.h>

#include <cmocka.h>

#include "clockudp.h"

static const uint8_t key[IOT_CLOCKUDP_KEY] = {1, 2, 3};
static const uint8_t other[IOT_CLOCKUDP_KEY] = {1, 2, 4};

static void test_round_trip(void **state)
{
    (void)state;
    struct iot_clockudp_msg m = {.kind = 2, .key_id = 0x1122334455667788ull, .nonce = 42,
                                 .t1 = -5, .t2 = 1796000000000000000ll, .t3 = 7},
                            got;
    uint8_t buf[IOT_CLOCKUDP_ANSWER];
    assert_int_equal(iot_clockudp_pack(buf, &m, key), IOT_CLOCKUDP_ANSWER);
    assert_int_equal(iot_clockudp_peek(buf, sizeof buf, &got), 0);
    assert_int_equal(got.kind, 2);
    assert_true(got.key_id == m.key_id);
    assert_int_equal(iot_clockudp_open(buf, sizeof buf, key, &got), 0);
    assert_true(got.nonce == 42 && got.t1 == -5 && got.t2 == m.t2 && got.t3 == 7);
    assert_int_equal(iot_clockudp_open(buf, sizeof buf, other, &got), -1);
    for (size_t i = 0; i < sizeof buf; i++) { /* every byte is covered */
        buf[i] ^= 0x10;
        assert_int_equal(iot_clockudp_open(buf, sizeof buf, key, &got), -1);
        buf[i] ^= 0x10;
    }
    assert_int_equal(iot_clockudp_peek(buf, IOT_CLOCKUDP_REQUEST, &got), -1);
    m.kind = 1;
    assert_int_equal(iot_clockudp_pack(buf, &m, key), IOT_CLOCKUDP_REQUEST);
    assert_int_equal(iot_clockudp_open(buf, IOT_CLOCKUDP_REQUEST, key, &got), 0);
    assert_int_equal(got.kind, 1);
    assert_int_equal(iot_clockudp_open(buf, IOT_CLOCKUDP_ANSWER, key, &got), -1);
}

static void test_kernel_time(void **state)
{
    (void)state;
    int a = iot_clockudp_socket(AF_INET), b = iot_clockudp_socket(AF_INET);
    assert_true(a >= 0 && b >= 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof sa;
    assert_int_equal(bind(b, (struct sockaddr *)&sa, sizeof sa), 0);
    assert_int_equal(getsockname(b, (struct sockaddr *)&sa, &len), 0);
    struct timespec t0, t1;
    clock_gettime(CLOCK_REALTIME, &t0);
    assert_int_equal(sendto(a, "x", 1, 0, (struct sockaddr *)&sa, sizeof sa), 1);
    uint8_t buf[8];
    int64_t at = 0;
    long n = -1;
    for (int i = 0; i < 1000 && n < 0; i++) {
        n = iot_clockudp_recv(b, buf, sizeof buf, &at, NULL, NULL);
        if (n < 0)
            usleep(1000);
    }
    clock_gettime(CLOCK_REALTIME, &t1);
    assert_int_equal(n, 1);
    int64_t lo = (int64_t)t0.tv_sec * 1000000000 + t0.tv_nsec;
    int64_t hi = (int64_t)t1.tv_sec * 1000000000 + t1.tv_nsec;
    assert_true(at >= lo - 1000 && at <= hi + 1000); /* the skew's midpoint: within a us */
    close(a);
    close(b);
}

static void test_endpoint(void **state)
{
    (void)state;
    char host[64];
    unsigned long port;
    assert_int_equal(iot_clockudp_tcp_endpoint("tcp://10.77.0.2:5555", host, sizeof host, &port), 0);
    assert_string_equal(host, "10.77.0.2");
    assert_int_equal(port, 5555);
    assert_int_equal(iot_clockudp_tcp_endpoint("tcp://[::1]:7000", host, sizeof host, &port), 0);
    assert_string_equal(host, "::1");
    assert_int_equal(port, 7000);
    assert_int_equal(iot_clockudp_tcp_endpoint("tcp://*:5555", host, sizeof host, &port), 0);
    assert_string_equal(host, "*");
    assert_int_equal(iot_clockudp_tcp_endpoint("ipc:///run/x", host, sizeof host, &port), -1);
    assert_int_equal(iot_clockudp_tcp_endpoint("tcp://nohost", host, sizeof host, &port), -1);
    assert_int_equal(iot_clockudp_tcp_endpoint("tcp://a:1", host, 1, &port), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_kernel_time),
        cmocka_unit_test(test_endpoint),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
