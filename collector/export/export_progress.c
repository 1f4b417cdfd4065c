#include "export_progress.h"

#include <stdio.h>
#include <time.h>
#include <unistd.h>

static struct {
    const char *program;
    int on;          /* may show a line */
    int shown;       /* a line is on the terminal */
    double start;    /* of the run */
    double after;    /* seconds into the run before a line is shown */
    double phase_at; /* of the phase */
    double drawn;    /* last redraw */
    const char *what;
    uint64_t total;
    unsigned calls;
} p;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void xp_progress_init(const char *program, enum xp_progress_mode mode, double after_s)
{
    p.program = program;
    p.after = after_s;
    p.shown = 0;
    p.drawn = 0;
    p.on = mode == XP_PROGRESS_ON || (mode == XP_PROGRESS_AUTO && isatty(STDERR_FILENO));
    p.start = p.phase_at = now();
}

void xp_progress_phase(const char *what, uint64_t total)
{
    p.what = what;
    p.total = total;
    p.phase_at = now();
    p.calls = 0;
}

/* "6.6 M", "120 k", "999". */
static void count_text(char *out, size_t n, double v)
{
    if (v >= 1e6)
        snprintf(out, n, "%.1f M", v / 1e6);
    else if (v >= 1e4)
        snprintf(out, n, "%.0f k", v / 1e3);
    else
        snprintf(out, n, "%.0f", v);
}

static void draw(uint64_t done, double t)
{
    char d[32], tot[32], rate[32], line[256];
    double secs = t - p.phase_at, r = secs > 0 ? (double)done / secs : 0;
    count_text(d, sizeof d, (double)done);
    count_text(rate, sizeof rate, r);
    if (p.total) {
        count_text(tot, sizeof tot, (double)p.total);
        double left = r > 0 ? (double)(p.total - (done < p.total ? done : p.total)) / r : 0;
        snprintf(line, sizeof line, "%s: %s: %s of %s events (%.0f %%), %s/s, %.0f s left",
                 p.program, p.what, d, tot, 100.0 * (double)done / (double)p.total, rate, left);
    } else {
        snprintf(line, sizeof line, "%s: %s: %s events, %s/s", p.program, p.what, d, rate);
    }
    /* \r and erase to the end of the line: the terminal's own line, no
     * scrolling log of redraws. */
    fprintf(stderr, "\r%s\033[K", line);
    fflush(stderr);
    p.shown = 1;
    p.drawn = t;
}

void xp_progress_step(uint64_t done)
{
    if (!p.on || (++p.calls & 65535))
        return;
    double t = now();
    if (t - p.start < p.after || t - p.drawn < 0.2)
        return;
    draw(done, t);
}

void xp_progress_end(void)
{
    if (p.shown) {
        fputs("\r\033[K", stderr);
        fflush(stderr);
        p.shown = 0;
    }
}
