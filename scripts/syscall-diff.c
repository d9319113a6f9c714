/*
 * syscall-diff: the socket calls with bad arguments, once against the kernel and
 * once against lowtide's shared object (packetdrill's interface,
 * ../shared/tools/packetdrill/src/packetdrill.h), one call a line, for `diff`: recv
 * and send with each flag, readv/writev/recvmsg/sendmsg with 0, -1, 1025 and 2000000
 * iovecs, bind and connect with families AF_UNSPEC/INET/INET6/UNIX/99 and lengths 0
 * to 200, shutdown's how, listen's backlog, socket's type and protocol, on a fresh
 * AF_INET and AF_INET6 socket and a listener (docs/linux-differences.md).
 *
 *   gcc -O1 -I../shared/tools/packetdrill/src -o /tmp/syscall-diff scripts/syscall-diff.c -ldl
 *   unshare -n sh -c 'ip link set lo up; /tmp/syscall-diff' > /tmp/kernel.txt
 *   /tmp/syscall-diff target/release/liblowtide_packetdrill.so \
 *       "local_ip=127.0.0.1 remote_ip=127.0.0.2" > /tmp/lowtide.txt
 *   diff /tmp/kernel.txt /tmp/lowtide.txt
 *
 * Expected differences that are not rules: socket types lowtide does not have
 * (SOCK_DGRAM, SOCK_RAW, AF_INET's SOCK_PACKET) and addresses it does not own (::1).
 * connect() to AF_INET/AF_INET6 addresses is not made (it would connect).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include "packetdrill.h"
static struct packetdrill_interface ifc; static int so;
#define U ifc.userdata
#define CALL(kexpr, sexpr) (so ? (sexpr) : (kexpr))
static void pr(const char *tag, long rc) { printf("%s rc=%ld", tag, rc); if (rc < 0) printf(" errno=%d", errno); printf("\n"); }
static int mk(int fam, int st) {
	int fd = CALL(socket(fam, SOCK_STREAM, 0), ifc.socket(U, fam, SOCK_STREAM, 0));
	if (st) { int one = 1; CALL(setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, 4), ifc.setsockopt(U, fd, SOL_SOCKET, SO_REUSEADDR, &one, 4));
		struct sockaddr_in a = {0}; a.sin_family = AF_INET; a.sin_port = htons(8080);
		struct sockaddr_in6 b = {0}; b.sin6_family = AF_INET6; b.sin6_port = htons(8080);
		void *p = fam == AF_INET ? (void *)&a : (void *)&b; socklen_t n = fam == AF_INET ? sizeof a : sizeof b;
		CALL(bind(fd, p, n), ifc.bind(U, fd, p, n)); CALL(listen(fd, 5), ifc.listen(U, fd, 5)); }
	return fd;
}
#include <signal.h>
int main(int argc, char **argv) { signal(SIGPIPE, SIG_IGN);
	if (argc > 1) { void *h = dlopen(argv[1], RTLD_NOW); ((packetdrill_interface_init_t)dlsym(h, "packetdrill_interface_init"))(argc > 2 ? argv[2] : NULL, &ifc); so = 1; }
	setvbuf(stdout, NULL, _IOLBF, 0); char buf[4096]; char tag[200]; struct iovec iov[2] = {{buf, 10}, {buf, 10}};
	int flagsv[] = {0, MSG_OOB, MSG_PEEK, MSG_DONTWAIT, MSG_WAITALL, MSG_TRUNC, MSG_ERRQUEUE, MSG_PEEK|MSG_TRUNC, MSG_NOSIGNAL, MSG_MORE, MSG_EOR, MSG_ZEROCOPY, MSG_FASTOPEN, MSG_CMSG_CLOEXEC, 0x40000000};
	for (int fam = 0; fam < 2; fam++) for (int st = 0; st < 2; st++) {
		int F = fam ? AF_INET6 : AF_INET;
		for (unsigned k = 0; k < sizeof flagsv / sizeof *flagsv; k++) for (int len = 0; len < 2; len++) {
			int fd = mk(F, st); size_t n = len ? 10 : 0;
			snprintf(tag, sizeof tag, "f%d s%d recv fl=%x n=%zu", F, st, flagsv[k], n);
			pr(tag, CALL(recv(fd, buf, n, flagsv[k] | MSG_DONTWAIT), ifc.recv(U, fd, buf, n, flagsv[k] | MSG_DONTWAIT)));
			snprintf(tag, sizeof tag, "f%d s%d send fl=%x n=%zu", F, st, flagsv[k], n);
			pr(tag, CALL(send(fd, buf, n, flagsv[k] | MSG_DONTWAIT | MSG_NOSIGNAL), ifc.send(U, fd, buf, n, flagsv[k] | MSG_DONTWAIT | MSG_NOSIGNAL)));
			CALL(close(fd), ifc.close(U, fd));
		}
		int iovc[] = {0, 1, -1, 1025, 2000000};
		for (int k = 0; k < 5; k++) {
			int fd = mk(F, st);
			snprintf(tag, sizeof tag, "f%d s%d readv cnt=%d", F, st, iovc[k]);
			pr(tag, CALL(readv(fd, iov, iovc[k]), ifc.readv(U, fd, iov, iovc[k])));
			snprintf(tag, sizeof tag, "f%d s%d writev cnt=%d", F, st, iovc[k]);
			pr(tag, CALL(writev(fd, iov, iovc[k]), ifc.writev(U, fd, iov, iovc[k])));
			struct msghdr m = {0}; m.msg_iov = iov; m.msg_iovlen = iovc[k] < 0 ? (size_t)-1 : (size_t)iovc[k];
			snprintf(tag, sizeof tag, "f%d s%d recvmsg cnt=%d", F, st, iovc[k]);
			pr(tag, CALL(recvmsg(fd, &m, MSG_DONTWAIT), ifc.recvmsg(U, fd, &m, MSG_DONTWAIT)));
			snprintf(tag, sizeof tag, "f%d s%d sendmsg cnt=%d", F, st, iovc[k]);
			pr(tag, CALL(sendmsg(fd, &m, MSG_DONTWAIT|MSG_NOSIGNAL), ifc.sendmsg(U, fd, &m, MSG_DONTWAIT|MSG_NOSIGNAL)));
			CALL(close(fd), ifc.close(U, fd));
		}
		/* bind / connect with odd addresses */
		struct sockaddr_storage ss; socklen_t lens[] = {0, 2, 8, 15, 16, 24, 27, 28, 128, 200};
		int fams[] = {AF_UNSPEC, AF_INET, AF_INET6, AF_UNIX, 99};
		for (int a = 0; a < 5; a++) for (int l = 0; l < 10; l++) {
			memset(&ss, 0, sizeof ss); ss.ss_family = fams[a];
			if (fams[a] == AF_INET) { ((struct sockaddr_in *)&ss)->sin_addr.s_addr = htonl(0x7f000001); ((struct sockaddr_in *)&ss)->sin_port = htons(9); }
			if (fams[a] == AF_INET6) { ((struct sockaddr_in6 *)&ss)->sin6_addr = in6addr_loopback; ((struct sockaddr_in6 *)&ss)->sin6_port = htons(9); }
			int fd = mk(F, st);
			snprintf(tag, sizeof tag, "f%d s%d bind af=%d len=%u", F, st, fams[a], lens[l]);
			pr(tag, CALL(bind(fd, (void *)&ss, lens[l]), ifc.bind(U, fd, (void *)&ss, lens[l])));
			CALL(close(fd), ifc.close(U, fd));
			if (fams[a] == AF_INET || fams[a] == AF_INET6) continue; /* would connect for real */
			fd = mk(F, st);
			snprintf(tag, sizeof tag, "f%d s%d connect af=%d len=%u", F, st, fams[a], lens[l]);
			pr(tag, CALL(connect(fd, (void *)&ss, lens[l]), ifc.connect(U, fd, (void *)&ss, lens[l])));
			snprintf(tag, sizeof tag, "  then listen");
			pr(tag, CALL(listen(fd, 1), ifc.listen(U, fd, 1)));
			CALL(close(fd), ifc.close(U, fd));
		}
		int hows[] = {-1, 0, 1, 2, 3};
		for (int k = 0; k < 5; k++) { int fd = mk(F, st);
			snprintf(tag, sizeof tag, "f%d s%d shutdown %d", F, st, hows[k]);
			pr(tag, CALL(shutdown(fd, hows[k]), ifc.shutdown(U, fd, hows[k])));
			snprintf(tag, sizeof tag, "  then listen");
			pr(tag, CALL(listen(fd, 1), ifc.listen(U, fd, 1)));
			CALL(close(fd), ifc.close(U, fd)); }
		int bl[] = {-1, 0, 1, 4096, 100000};
		for (int k = 0; k < 5; k++) { int fd = mk(F, st);
			snprintf(tag, sizeof tag, "f%d s%d listen %d", F, st, bl[k]);
			pr(tag, CALL(listen(fd, bl[k]), ifc.listen(U, fd, bl[k])));
			snprintf(tag, sizeof tag, "f%d s%d accept", F, st);
			int fl = CALL(fcntl(fd, F_GETFL), ifc.fcntl(U, fd, F_GETFL));
			CALL(fcntl(fd, F_SETFL, fl | O_NONBLOCK), ifc.fcntl(U, fd, F_SETFL, fl | O_NONBLOCK));
			pr(tag, CALL(accept(fd, NULL, NULL), ifc.accept(U, fd, NULL, NULL)));
			CALL(close(fd), ifc.close(U, fd)); }
	}
	int sk[] = {-1, 0, 1, 2, 3, 5, 6, 10, 11, 99};
	for (int t = 0; t < 10; t++) for (int p = 0; p < 10; p++) {
		int fd = CALL(socket(AF_INET, sk[t], sk[p]), ifc.socket(U, AF_INET, sk[t], sk[p]));
		snprintf(tag, sizeof tag, "socket type %d proto %d", sk[t], sk[p]); pr(tag, fd >= 0 ? 0 : -1);
		if (fd >= 0) CALL(close(fd), ifc.close(U, fd));
	}
	return 0;
}
