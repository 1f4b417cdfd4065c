/* Command-line options and config files from one table.
 *
 * Each program describes its options once; the same table drives
 * getopt_long, the --help text and the config file, whose keys are the long
 * option names ("listen = tcp://0.0.0.0:5555"), and the manual page
 * (--man).  Command-line values win over the config file.  Exit codes: 0
 * after --help/--version/--man, 2 on a usage error. */
#ifndef IOT_OPTS_H
#define IOT_OPTS_H

#include <stdint.h>

enum iot_opt_type {
    IOT_OPT_STRING, /* char ** (points into argv or a config-owned copy) */
    IOT_OPT_INT,    /* long * */
    IOT_OPT_SIZE,   /* uint64_t *, accepts K/M/G suffixes */
    IOT_OPT_FLAG,   /* int *, set to 1; no argument (config: true/false) */
};

struct iot_opt {
    const char *name;     /* long name without "--"; also the config key */
    char short_name;      /* 0 for none */
    enum iot_opt_type type;
    void *value;
    const char *arg_name; /* shown in --help, e.g. "tcp://HOST:PORT" */
    const char *help;
};

/* A section of the manual page beyond NAME, SYNOPSIS, DESCRIPTION and
 * OPTIONS (EXIT STATUS, FILES, SEE ALSO...): plain text, paragraphs
 * separated by an empty line. */
struct iot_man_section {
    const char *title;
    const char *text;
};

struct iot_opts_spec {
    const char *program;
    const char *synopsis;      /* "--listen tcp://HOST:PORT --store DIR [options]" */
    const char *description;   /* paragraph printed under the synopsis */
    const struct iot_opt *opts;
    int n_opts;
    int allow_config;          /* adds --config FILE */
    /* The manual page, printed by --man from this same table: its section
     * (1, 8), the one-line summary after the name, and the further sections. */
    int man_section;
    const char *summary;
    const struct iot_man_section *man;
    int n_man;
};

#define IOT_EXIT_OK 0
#define IOT_EXIT_FAILURE 1
#define IOT_EXIT_USAGE 2

/* Parses argv (and the config file named by --config).  Returns the index of
 * the first non-option argument, or exits with IOT_EXIT_USAGE after printing
 * a clear message on an unknown option, a missing or bad value, or an
 * unreadable or malformed config file. */
int iot_opts_parse(const struct iot_opts_spec *spec, int argc, char **argv);

/* Sets the options a config file names (what --config does, without
 * exiting): 0, or -1 after a message on stderr.  String values are copies
 * kept for the life of the process. */
int iot_opts_load_config(const struct iot_opts_spec *spec, const char *path);

void iot_opts_usage(const struct iot_opts_spec *spec, int to_stderr);

/* The manual page in roff (man(7)) on stdout: what --man prints, and what
 * the build installs, so that --help and the page cannot disagree. */
void iot_opts_man(const struct iot_opts_spec *spec);

/* Parses "64M", "1G", "4096"; returns -1 on a malformed value. */
int iot_parse_size(const char *s, uint64_t *out);

#endif
