/* What GlusterFS's own build puts in its config.h (which it force-includes
 * into every translator) and which its installed headers depend on but do not
 * define themselves. Include this before any <glusterfs/...> header.
 *
 * Most of these only pick inline code paths; three change the layout of
 * structures shared with libglusterfs and must match how Debian built it:
 *   _FILE_OFFSET_BITS=64   off_t in every fop signature, struct iatt, ...
 *   HAVE_ATOMIC_BUILTINS   gf_atomic_*_t are bare integers, not {lock, value}
 *   SIZEOF_LONG            (same, for gf_atomic_intptr_t/uintptr_t)
 * Debian's libglusterfs is a non-debug build with the memory pool enabled
 * (exports mem_get_malloc) and events enabled (exports _gf_event), so DEBUG
 * and GF_DISABLE_MEMPOOL stay undefined and USE_EVENTS is defined. */
#ifndef IOTRACE_GLUSTER_CONFIG_H
#define IOTRACE_GLUSTER_CONFIG_H

#if !defined(_FILE_OFFSET_BITS) || _FILE_OFFSET_BITS != 64
#error "build GlusterFS translators with -D_FILE_OFFSET_BITS=64"
#endif
#ifndef _GNU_SOURCE
#error "build GlusterFS translators with -D_GNU_SOURCE"
#endif

#define GF_LINUX_HOST_OS 1
#define SIZEOF_SHORT __SIZEOF_SHORT__
#define SIZEOF_INT __SIZEOF_INT__
#define SIZEOF_LONG __SIZEOF_LONG__
#define SIZEOF_LONG_LONG __SIZEOF_LONG_LONG__
#define HAVE_ATOMIC_BUILTINS 1
#define HAVE_SYNC_BUILTINS 1
#define USE_EVENTS 1
#define HAVE_LINUX_FALLOC_H 1
#define HAVE_ENDIAN_H 1
#define HAVE_SYS_XATTR_H 1
#define HAVE_LLISTXATTR 1
#define HAVE_STRNLEN 1
#define HAVE_ARGP 1
#define HAVE_STATIC_ASSERT 1
#define HAVE_STRUCT_STAT_ST_ATIM_TV_NSEC 1
#define HAVE_UTIMENSAT 1
#define HAVE_FUTIMENS 1
#define HAVE_PTHREAD_SETNAME_NP_TWO_ARGS 1

#endif
