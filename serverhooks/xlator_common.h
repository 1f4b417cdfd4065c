/* Shared by the iotrace-client and iotrace-server GlusterFS translators. */
#ifndef IOTRACE_XLATOR_COMMON_H
#define IOTRACE_XLATOR_COMMON_H

#include "gluster_config.h"

#include <glusterfs/xlator.h>

/* Keys iotrace-client adds to a request's xdata when the calling thread is
 * inside an MPI-IO call, and iotrace-server reads on the brick. */
#define IOTRACE_XDATA_JOB "iotrace.job"       /* string, job id */
#define IOTRACE_XDATA_CALLID "iotrace.callid" /* uint64, CallID */
#define IOTRACE_XDATA_UID "iotrace.uid"       /* uint32, whose registry gave the tag */

/* Configuration common to both translators. Strings are owned (malloc). */
struct iotrace_xl_conf {
    char *agent;    /* agent endpoint; NULL when neither option nor env set */
    char *registry; /* CallID registry name; NULL likewise */
};

/* Volume options both translators accept (NULL-key terminated). */
extern volume_option_t iotrace_xl_options[];

/* Checks that `this` has exactly one subvolume (logged; -1 if not). */
int iotrace_xl_check_graph(xlator_t *this, const char *role);
/* Reads the options in `options` (values not there: the declared defaults),
 * falling back to IOTRACE_AGENT and IOTRACE_REGISTRY when an option is empty,
 * into *conf. Returns 0 or -1 (logged; *conf untouched). */
int iotrace_xl_conf_load(xlator_t *this, dict_t *options, struct iotrace_xl_conf *conf);
/* Frees the strings of *conf and clears it. */
void iotrace_xl_conf_free(struct iotrace_xl_conf *conf);
/* 1 when `a` and `b` are both NULL or equal strings. */
int iotrace_xl_same(const char *a, const char *b);

/* For UNPAREN (a, b): a parenthesised list as a list. */
#define IOTRACE_UNPAREN(...) __VA_ARGS__

/* The file operations both translators handle: every fop that can make a
 * brick read or write its disk and has a disk-operation kind in the wire
 * format (proto/functions.tsv, enum iot_disk_kind). Everything else passes
 * through untouched (libglusterfs fills in its default_* fops).
 *
 *   X(fop, kind, (params), (args), (cbk params), (cbk args),
 *     loc, fd, offset, length, flags)
 *
 * fop                  the member of struct xlator_fops
 * kind                 enum iot_disk_kind, an expression of the params
 * params / args        the fop's parameters between `this` and `xdata`,
 *                      and the same as an argument list
 * cbk params / args    its callback's parameters after op_errno (xdata
 *                      included), and as an argument list
 * loc, fd              where the object (the file inside the brick) comes
 *                      from: one of them, the other NULL
 * offset, length       byte offset (-1: none) and bytes asked for
 * flags                IOTRACE_FOP_* below
 *
 * Kinds by fop: fsync with datasync set is fdatasync; truncate/ftruncate
 * record the new size as the offset; copy_file_range is recorded against
 * its destination; rename names the source, link the existing file. */
#define IOTRACE_FOP_ENTRY 1u  /* creates a directory entry: posix turns each
                                 xdata key into an xattr (see xlator_server.c) */
#define IOTRACE_FOP_UNNAME 2u /* the loc's inode loses the name it had */

/* clang-format off */
#define IOTRACE_FOPS(X)                                                                         \
    X(readv, IOT_DISK_READV,                                                                    \
      (fd_t *fd, size_t size, off_t offset, uint32_t flags), (fd, size, offset, flags),         \
      (struct iovec *vector, int32_t count, struct iatt *stbuf, struct iobref *iobref,          \
       dict_t *xdata), (vector, count, stbuf, iobref, xdata),                                   \
      NULL, fd, offset, size, 0)                                                                \
    X(writev, IOT_DISK_WRITEV,                                                                  \
      (fd_t *fd, struct iovec *vector, int32_t count, off_t offset, uint32_t flags,             \
       struct iobref *iobref), (fd, vector, count, offset, flags, iobref),                      \
      (struct iatt *prebuf, struct iatt *postbuf, dict_t *xdata), (prebuf, postbuf, xdata),     \
      NULL, fd, offset, iov_length(vector, count), 0)                                           \
    X(fsync, (datasync ? IOT_DISK_FDATASYNC : IOT_DISK_FSYNC),                                  \
      (fd_t *fd, int32_t datasync), (fd, datasync),                                             \
      (struct iatt *prebuf, struct iatt *postbuf, dict_t *xdata), (prebuf, postbuf, xdata),     \
      NULL, fd, -1, 0, 0)                                                                       \
    X(ftruncate, IOT_DISK_FTRUNCATE,                                                            \
      (fd_t *fd, off_t offset), (fd, offset),                                                   \
      (struct iatt *prebuf, struct iatt *postbuf, dict_t *xdata), (prebuf, postbuf, xdata),     \
      NULL, fd, offset, 0, 0)                                                                   \
    X(truncate, IOT_DISK_TRUNCATE,                                                              \
      (loc_t *loc, off_t offset), (loc, offset),                                                \
      (struct iatt *prebuf, struct iatt *postbuf, dict_t *xdata), (prebuf, postbuf, xdata),     \
      loc, NULL, offset, 0, 0)                                                                  \
    X(fallocate, IOT_DISK_FALLOCATE,                                                            \
      (fd_t *fd, int32_t keep_size, off_t offset, size_t len), (fd, keep_size, offset, len),    \
      (struct iatt *pre, struct iatt *post, dict_t *xdata), (pre, post, xdata),                 \
      NULL, fd, offset, len, 0)                                                                 \
    X(discard, IOT_DISK_DISCARD,                                                                \
      (fd_t *fd, off_t offset, size_t len), (fd, offset, len),                                  \
      (struct iatt *pre, struct iatt *post, dict_t *xdata), (pre, post, xdata),                 \
      NULL, fd, offset, len, 0)                                                                 \
    X(zerofill, IOT_DISK_ZEROFILL,                                                              \
      (fd_t *fd, off_t offset, off_t len), (fd, offset, len),                                   \
      (struct iatt *pre, struct iatt *post, dict_t *xdata), (pre, post, xdata),                 \
      NULL, fd, offset, len, 0)                                                                 \
    X(create, IOT_DISK_CREATE,                                                                  \
      (loc_t *loc, int32_t flags, mode_t mode, mode_t umask, fd_t *fd),                         \
      (loc, flags, mode, umask, fd),                                                            \
      (fd_t *fd, inode_t *inode, struct iatt *buf, struct iatt *preparent,                      \
       struct iatt *postparent, dict_t *xdata),                                                 \
      (fd, inode, buf, preparent, postparent, xdata),                                           \
      loc, NULL, -1, 0, IOTRACE_FOP_ENTRY)                                                      \
    X(open, IOT_DISK_OPEN,                                                                      \
      (loc_t *loc, int32_t flags, fd_t *fd), (loc, flags, fd),                                  \
      (fd_t *fd, dict_t *xdata), (fd, xdata),                                                   \
      loc, NULL, -1, 0, 0)                                                                      \
    X(unlink, IOT_DISK_UNLINK,                                                                  \
      (loc_t *loc, int xflags), (loc, xflags),                                                  \
      (struct iatt *preparent, struct iatt *postparent, dict_t *xdata),                         \
      (preparent, postparent, xdata),                                                           \
      loc, NULL, -1, 0, IOTRACE_FOP_UNNAME)                                                     \
    X(flush, IOT_DISK_FLUSH,                                                                    \
      (fd_t *fd), (fd),                                                                         \
      (dict_t *xdata), (xdata),                                                                 \
      NULL, fd, -1, 0, 0)                                                                       \
    X(rename, IOT_DISK_RENAME,                                                                  \
      (loc_t *oldloc, loc_t *newloc), (oldloc, newloc),                                         \
      (struct iatt *buf, struct iatt *preoldparent, struct iatt *postoldparent,                 \
       struct iatt *prenewparent, struct iatt *postnewparent, dict_t *xdata),                   \
      (buf, preoldparent, postoldparent, prenewparent, postnewparent, xdata),                   \
      oldloc, NULL, -1, 0, IOTRACE_FOP_UNNAME)                                                  \
    X(link, IOT_DISK_LINK,                                                                      \
      (loc_t *oldloc, loc_t *newloc), (oldloc, newloc),                                         \
      (inode_t *inode, struct iatt *buf, struct iatt *preparent, struct iatt *postparent,       \
       dict_t *xdata), (inode, buf, preparent, postparent, xdata),                              \
      oldloc, NULL, -1, 0, IOTRACE_FOP_ENTRY)                                                   \
    X(mknod, IOT_DISK_MKNOD,                                                                    \
      (loc_t *loc, mode_t mode, dev_t rdev, mode_t umask), (loc, mode, rdev, umask),            \
      (inode_t *inode, struct iatt *buf, struct iatt *preparent, struct iatt *postparent,       \
       dict_t *xdata), (inode, buf, preparent, postparent, xdata),                              \
      loc, NULL, -1, 0, IOTRACE_FOP_ENTRY)                                                      \
    X(mkdir, IOT_DISK_MKDIR,                                                                    \
      (loc_t *loc, mode_t mode, mode_t umask), (loc, mode, umask),                              \
      (inode_t *inode, struct iatt *buf, struct iatt *preparent, struct iatt *postparent,       \
       dict_t *xdata), (inode, buf, preparent, postparent, xdata),                              \
      loc, NULL, -1, 0, IOTRACE_FOP_ENTRY)                                                      \
    X(rmdir, IOT_DISK_RMDIR,                                                                    \
      (loc_t *loc, int xflags), (loc, xflags),                                                  \
      (struct iatt *preparent, struct iatt *postparent, dict_t *xdata),                         \
      (preparent, postparent, xdata),                                                           \
      loc, NULL, -1, 0, IOTRACE_FOP_UNNAME)                                                     \
    X(setattr, IOT_DISK_SETATTR,                                                                \
      (loc_t *loc, struct iatt *stbuf, int32_t valid), (loc, stbuf, valid),                     \
      (struct iatt *statpre, struct iatt *statpost, dict_t *xdata), (statpre, statpost, xdata), \
      loc, NULL, -1, 0, 0)                                                                      \
    X(fsetattr, IOT_DISK_FSETATTR,                                                              \
      (fd_t *fd, struct iatt *stbuf, int32_t valid), (fd, stbuf, valid),                        \
      (struct iatt *statpre, struct iatt *statpost, dict_t *xdata), (statpre, statpost, xdata), \
      NULL, fd, -1, 0, 0)                                                                       \
    X(copy_file_range, IOT_DISK_COPY_FILE_RANGE,                                                \
      (fd_t *fd_in, off64_t off_in, fd_t *fd_out, off64_t off_out, size_t len, uint32_t flags), \
      (fd_in, off_in, fd_out, off_out, len, flags),                                             \
      (struct iatt *stbuf, struct iatt *prebuf_dst, struct iatt *postbuf_dst, dict_t *xdata),   \
      (stbuf, prebuf_dst, postbuf_dst, xdata),                                                  \
      NULL, fd_out, off_out, len, 0)
/* clang-format on */

#endif
