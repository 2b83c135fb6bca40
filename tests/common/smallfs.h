/*
 * tests/common/smallfs.h — a really small filesystem, for tests of what the
 * daemons do when a disk or /dev/shm is full.
 *
 * smallfs_mount(dir, "64k") mounts a tmpfs of that size on dir inside a mount
 * namespace of this process alone (unshare(CLONE_NEWNS), and a user namespace
 * as well when the process is not root), after making every mount private: no
 * other process on the machine sees it, and it is gone when the process and
 * its children end. It must run while the process has one thread (unshare
 * refuses otherwise), so call it first in a test. smallfs_resize() remounts it
 * with another size: "space returns".
 *
 * Both return 0, or -1 with the reason in why. A test that cannot get a small
 * filesystem must use another way to make writes fail for real (RLIMIT_FSIZE)
 * or fail: it never skips itself into a pass.
 */
#ifndef RETRACE_TESTS_SMALLFS_H
#define RETRACE_TESTS_SMALLFS_H

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <unistd.h>

static inline int smallfs_write_file(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC), ok;
	if (fd < 0)
		return -1;
	ok = write(fd, text, strlen(text)) == (ssize_t)strlen(text);
	close(fd);
	return ok ? 0 : -1;
}

/* A mount namespace of our own, every mount in it private. */
static inline int smallfs_private_ns(char *why, size_t n)
{
	if (unshare(CLONE_NEWNS) != 0) {
		int e = errno;
		char map[64];
		uid_t uid = getuid();
		gid_t gid = getgid();
		/* Not root: a user namespace gives the capability to mount a tmpfs. */
		if (unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0) {
			snprintf(why, n, "unshare(CLONE_NEWNS): %s; with CLONE_NEWUSER: %s",
				 strerror(e), strerror(errno));
			return -1;
		}
		snprintf(map, sizeof map, "0 %u 1", (unsigned)uid);
		if (smallfs_write_file("/proc/self/setgroups", "deny") != 0 ||
		    smallfs_write_file("/proc/self/uid_map", map) != 0)
			goto maps;
		snprintf(map, sizeof map, "0 %u 1", (unsigned)gid);
		if (smallfs_write_file("/proc/self/gid_map", map) != 0)
			goto maps;
	}
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) {
		snprintf(why, n, "making mounts private: %s", strerror(errno));
		return -1;
	}
	return 0;
maps:
	snprintf(why, n, "writing the user namespace's id maps: %s", strerror(errno));
	return -1;
}

static inline int smallfs_mount(const char *dir, const char *size, char *why, size_t n)
{
	char opt[64];
	if (smallfs_private_ns(why, n) != 0)
		return -1;
	snprintf(opt, sizeof opt, "size=%s,mode=1777", size);
	if (mount("rt-smallfs", dir, "tmpfs", 0, opt) != 0) {
		snprintf(why, n, "mount -t tmpfs -o %s on %.200s: %s", opt, dir, strerror(errno));
		return -1;
	}
	return 0;
}

static inline int smallfs_resize(const char *dir, const char *size, char *why, size_t n)
{
	char opt[64];
	snprintf(opt, sizeof opt, "size=%s,mode=1777", size);
	if (mount("rt-smallfs", dir, "tmpfs", MS_REMOUNT, opt) != 0) {
		snprintf(why, n, "remount -o %s on %.200s: %s", opt, dir, strerror(errno));
		return -1;
	}
	return 0;
}

#endif
