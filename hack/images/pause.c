/* The pod sandbox's first process: holds the pod's namespaces, reaps orphans, exits on
 * SIGINT/SIGTERM. Built static so the image needs nothing but this file. */
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

static void on_stop(int sig) { _exit(sig == SIGTERM ? 0 : 1); }

static void on_child(int sig)
{
	(void)sig;
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
}

int main(void)
{
	signal(SIGINT, on_stop);
	signal(SIGTERM, on_stop);
	signal(SIGCHLD, on_child);
	for (;;)
		pause();
}
