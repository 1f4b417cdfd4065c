/* What programs do with descriptors they think are all theirs, after a
 * first traced write: fd_abuse MODE DIR.  Every mode ends with more traced
 * writes, whose events must still reach the store, and prints what it saw,
 * which must be the same traced and untraced.
 *
 *   close-all   close() every number up to the descriptor limit (daemons)
 *   dup2-all    dup2() /dev/null onto every open number above 2
 *   dup3-all    the same with dup3(O_CLOEXEC)
 *   closefrom   closefrom(3)
 *   close-range close_range(3, ~0U, 0)
 *   fork-daemon a child that forks, closes everything and writes; the
 *               parent waits for it
 *
 * Output: what it did, the same traced and untraced (the library's own
 * descriptor shows in /proc/self/fd, so counts of open numbers would not
 * be). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

static void write_file(const char *dir, const char *name, int n)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) {
        perror(path);
        exit(2);
    }
    for (int i = 0; i < n; i++)
        if (write(fd, "0123456789abcdef", 16) != 16) {
            perror("write");
            exit(2);
        }
    if (close(fd) != 0) {
        perror("close");
        exit(2);
    }
}

/* Open numbers above 2, as /proc/self/fd lists them, less the directory's
 * own. */
static int open_fds(int *fds, int max)
{
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return 0;
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) && n < max;) {
        int fd = atoi(e->d_name);
        if (e->d_name[0] != '.' && fd > 2 && fd != dirfd(d))
            fds[n++] = fd;
    }
    closedir(d);
    return n;
}

static int max_fd(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur > 65536)
        return 65536;
    return (int)rl.rlim_cur;
}

static void close_all(void)
{
    for (int fd = 3, max = max_fd(); fd < max; fd++)
        close(fd);
}

static void dup_all(int use_dup3)
{
    int null = open("/dev/null", O_RDWR);
    int fds[4096], n = open_fds(fds, 4096);
    for (int i = 0; i < n; i++) {
        if (fds[i] == null)
            continue;
        int r = use_dup3 ? dup3(null, fds[i], O_CLOEXEC) : dup2(null, fds[i]);
        if (r != fds[i]) {
            fprintf(stderr, "dup onto %d: %s\n", fds[i], strerror(errno));
            exit(3);
        }
        /* The number is the program's now: it refers to /dev/null. */
        char link[64], target[256];
        snprintf(link, sizeof link, "/proc/self/fd/%d", fds[i]);
        ssize_t len = readlink(link, target, sizeof target - 1);
        target[len > 0 ? len : 0] = '\0';
        if (strcmp(target, "/dev/null") != 0) {
            fprintf(stderr, "%d is %s, not /dev/null\n", fds[i], target);
            exit(3);
        }
        close(fds[i]);
    }
    close(null);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: fd_abuse close-all|dup2-all|dup3-all|closefrom|close-range|"
                        "fork-daemon DIR\n");
        return 1;
    }
    const char *mode = argv[1], *dir = argv[2];
    write_file(dir, "before", 64);
    if (!strcmp(mode, "close-all")) {
        close_all();
    } else if (!strcmp(mode, "dup2-all")) {
        dup_all(0);
    } else if (!strcmp(mode, "dup3-all")) {
        dup_all(1);
    } else if (!strcmp(mode, "closefrom")) {
        closefrom(3);
    } else if (!strcmp(mode, "close-range")) {
        if (close_range(3, ~0U, 0) != 0) {
            perror("close_range");
            return 3;
        }
    } else if (!strcmp(mode, "fork-daemon")) {
        pid_t pid = fork();
        if (pid == 0) {
            if (fork() == 0) { /* the daemon */
                setsid();
                close_all();
                write_file(dir, "daemon", 64);
                exit(0);
            }
            _exit(0);
        }
        waitpid(pid, NULL, 0);
        /* The grandchild is not ours to wait for: poll for its file. */
        char path[4096];
        snprintf(path, sizeof path, "%s/daemon", dir);
        for (int i = 0; i < 1000; i++) {
            if (access(path, F_OK) == 0)
                break;
            usleep(10000);
        }
    } else {
        fprintf(stderr, "fd_abuse: unknown mode %s\n", mode);
        return 1;
    }
    write_file(dir, "after", 64);
    printf("%s: wrote before and after\n", mode);
    return 0;
}
