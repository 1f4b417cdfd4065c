/* Which cgroup paths prove a launcher's job (agent/launcher.c): the ones
 * only root can make, for the sender's own uid where the path names one. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "launcher.h"

static const char *job_of(const char *text, uint32_t uid)
{
    static char job[65];
    return launcher_job_of_cgroups(text, uid, job, sizeof job) ? job : NULL;
}

static void test_slurm_paths(void **state)
{
    (void)state;
    assert_string_equal(job_of("6:freezer:/slurm/uid_1000/job_4711/step_0/task_0\n", 1000), "4711");
    assert_string_equal(job_of("4:memory:/slurm_cn1/uid_0/job_12/step_batch\n", 0), "12");
    assert_string_equal(job_of("0::/system.slice/slurmstepd.scope/job_99/step_0/user/task_0\n", 5),
                        "99");
    assert_string_equal(job_of("0::/system.slice/cn1_slurmstepd.scope/job_7/step_0\n", 5), "7");
    assert_string_equal(job_of("1:cpu:/\n6:freezer:/slurm/uid_3/job_8/step_0\n0::/\n", 3), "8");
}

static void test_forgeries(void **state)
{
    (void)state;
    /* another user's job (v1 names the uid) */
    assert_null(job_of("6:freezer:/slurm/uid_1000/job_4711/step_0\n", 65534));
    /* a user's own delegated subtree, named like a job */
    assert_null(job_of("0::/user.slice/user-65534.slice/user@65534.service/job_4711/x\n", 65534));
    assert_null(job_of("0::/user.slice/system.slice/slurmstepd.scope/job_4711\n", 65534));
    /* look-alikes */
    assert_null(job_of("0::/system.slice/notslurmstepd.scope/job_4711\n", 0));
    assert_null(job_of("0::/system.slice/slurmstepd.scope/job_47x11\n", 0));
    assert_null(job_of("6:freezer:/slurmx/uid_0/job_1\n", 0));
    assert_null(job_of("6:freezer:/slurm/uid_0/jobs_1\n", 0));
    assert_null(job_of("", 0));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_slurm_paths),
        cmocka_unit_test(test_forgeries),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
