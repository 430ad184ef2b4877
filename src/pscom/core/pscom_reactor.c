/*
 * Progress: busy-polled pollers (shm rings) and file descriptors in one epoll set.
 * Waiting spins for PSP_SPIN_US without progress, then blocks in epoll_wait; pollers arm a
 * wakeup (the shm doorbell) before that so that nothing is missed.
 */
#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <poll.h>
#include <unistd.h>
#include "pscom_priv.h"

#define MAX_EVENTS 64

static pscom_poller_t pollers = {&pollers, &pollers, NULL, NULL, NULL};
static int pollers_changed;
static int epfd = -1;
static int n_fds;
static int n_busy_fds;
static unsigned int round_count;

/* events of the epoll round being dispatched, so that a delete can cancel pending ones */
static struct epoll_event evs[MAX_EVENTS];
static int ev_next, ev_count;

/* Threaded mode: one thread at a time blocks (the blocker); the others keep polling. When one
   of them completes a request meanwhile, it wakes the blocker through this eventfd. It is not
   in the epoll set: another thread's epoll round would drain it, and a poll() that was woken
   but then finds nothing readable sleeps on. Only the blocker reads it. */
int pscom_reactor_blocker; /* 1: a thread blocks; 2: and it has been woken */
static int wake_fd = -1;

void pscom_reactor_wake_blocker(void)
{
    if (pscom_reactor_blocker == 1) {
        pscom_reactor_blocker = 2; /* one write per block is enough */
        eventfd_write(wake_fd, 1);
    }
}

void pscom_reactor_init(void)
{
    if (epfd >= 0)
        return;
    epfd = epoll_create1(EPOLL_CLOEXEC);
    if (epfd < 0)
        pscom_fatal("epoll_create1: %s", strerror(errno));
    wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (wake_fd < 0)
        pscom_fatal("eventfd: %s", strerror(errno));
}

void pscom_reactor_destroy(void)
{
    if (wake_fd >= 0)
        close(wake_fd);
    wake_fd = -1;
    if (epfd >= 0)
        close(epfd);
    epfd = -1;
}

void pscom_poller_add(pscom_poller_t *p)
{
    p->next = &pollers;
    p->prev = pollers.prev;
    pollers.prev->next = p;
    pollers.prev = p;
    pollers_changed = 1;
}

void pscom_poller_del(pscom_poller_t *p)
{
    if (!p->next || p->next == p)
        return;
    p->prev->next = p->next;
    p->next->prev = p->prev;
    p->next = p->prev = p;
    pollers_changed = 1;
}

int pscom_ufd_add(pscom_ufd_t *ufd)
{
    struct epoll_event ev = {.events = ufd->events, .data.ptr = ufd};
    if (epoll_ctl(epfd, EPOLL_CTL_ADD, ufd->fd, &ev) < 0)
        return -1;
    n_fds++;
    return 0;
}

void pscom_ufd_mod(pscom_ufd_t *ufd, uint32_t events)
{
    if (ufd->events == events)
        return;
    ufd->events = events;
    struct epoll_event ev = {.events = events, .data.ptr = ufd};
    epoll_ctl(epfd, EPOLL_CTL_MOD, ufd->fd, &ev);
}

void pscom_ufd_del(pscom_ufd_t *ufd)
{
    epoll_ctl(epfd, EPOLL_CTL_DEL, ufd->fd, NULL);
    n_fds--;
    for (int i = ev_next; i < ev_count; i++)
        if (evs[i].data.ptr == ufd)
            evs[i].data.ptr = NULL;
}

void pscom_reactor_busy_fd(int delta)
{
    n_busy_fds += delta;
}

static int epoll_round(int timeout_ms)
{
    int n = epoll_wait(epfd, evs, MAX_EVENTS, timeout_ms);
    if (n <= 0)
        return 0;
    ev_count = n;
    for (ev_next = 0; ev_next < ev_count;) {
        struct epoll_event *ev = &evs[ev_next++];
        pscom_ufd_t *ufd = ev->data.ptr;
        if (ufd)
            ufd->handler(ufd, ev->events);
    }
    ev_count = ev_next = 0;
    return 1;
}

static uint64_t now_us(void)
{
    return pscom_now_ns() / 1000;
}

/* Every 256th round: is it time to look at the idle fds again? An epoll_wait costs more than
   a whole shm ping-pong; done every 256 rounds it cost a busy rank one per few messages. */
static int idle_fds_due(void)
{
    static uint64_t next_us;
    if (!pscom_config.fd_poll_us)
        return 1;
    uint64_t now = now_us();
    if (now < next_us)
        return 0;
    next_us = now + pscom_config.fd_poll_us;
    return 1;
}

static __attribute__((noinline)) int poll_all(unsigned round)
{
    int made = 0;
    pollers_changed = 0;
    for (pscom_poller_t *p = pollers.next; p != &pollers;) {
        pscom_poller_t *next = p->next;
        made |= p->poll(p);
        if (pollers_changed)
            break; /* the list changed under us; the rest waits for the next round */
        p = next;
    }
    /* fds that carry data are polled every round; listen and doorbell fds now and then */
    if (n_busy_fds > 0 || ((round & 255) == 0 && idle_fds_due()))
        made |= epoll_round(0);
    return made;
}

static inline __attribute__((always_inline)) int progress_poll(void)
{
    unsigned round = ++round_count;
    pscom_poller_t *only = pollers.next;
    if (unlikely(pscom_fc_grants_due)) /* credit given back by the last round's receives */
        pscom_fc_send_grants();
    /* the common case, a job over one transport: its poller alone, no fd due (the rest out of
       line, so that this path saves no registers) */
    if (likely(only->next == &pollers && only != &pollers && !n_busy_fds && (round & 255)))
        return only->poll(only);
    return poll_all(round);
}

int pscom_progress_poll(void)
{
    return progress_poll();
}

static int block_hint_ms = -1;

void pscom_progress_block_hint(int timeout_ms)
{
    if (block_hint_ms < 0 || timeout_ms < block_hint_ms)
        block_hint_ms = timeout_ms;
}

/* Threaded mode, another thread blocks already: it is woken for completions; this one keeps
   polling. It leaves the pollers' wakeup arming (shm recv_sleeping) alone: disarming it here
   would let the blocker sleep through a message. */
static void yield_to_blocker(void)
{
    pscom_unlock();
    sched_yield();
    pscom_lock();
}

/* Threaded mode: wait without the lock for an fd event or a wakeup; fetch the events with it. */
static void block_unlocked(int timeout_ms)
{
    struct pollfd pfd[2] = {{.fd = epfd, .events = POLLIN}, {.fd = wake_fd, .events = POLLIN}};
    eventfd_t v;
    pscom_reactor_blocker = 1;
    pscom_unlock();
    poll(pfd, 2, timeout_ms);
    pscom_lock();
    if (pscom_reactor_blocker == 2)
        eventfd_read(wake_fd, &v);
    pscom_reactor_blocker = 0;
    epoll_round(0);
}

void pscom_progress_block(int timeout_ms)
{
    if (pscom_global.threaded && pscom_reactor_blocker) {
        yield_to_blocker();
        return;
    }
    int work = 0;
    block_hint_ms = -1;
    pscom_precon_check_timeouts();
    pscom_fc_check_stalls();
    for (pscom_poller_t *p = pollers.next; p != &pollers; p = p->next)
        if (p->prepare_block && p->prepare_block(p))
            work = 1;
    if (block_hint_ms >= 0 && (timeout_ms < 0 || block_hint_ms < timeout_ms))
        timeout_ms = block_hint_ms;
    if (!work) {
        pscom_stats.progress_blocks++;
        if (pscom_global.threaded)
            block_unlocked(timeout_ms);
        else
            epoll_round(timeout_ms);
    }
    for (pscom_poller_t *p = pollers.next; p != &pollers; p = p->next)
        if (p->end_block)
            p->end_block(p);
}

void pscom_wait_until(int (*done)(void *), void *arg)
{
    unsigned int idle = 0;
    uint64_t idle_since = 0;
    while (!done(arg)) {
        if (pscom_progress_poll()) {
            idle = 0;
            idle_since = 0;
            continue;
        }
        if (pscom_global.threaded) {
            pscom_unlock(); /* the other threads are not held up by our pause */
            pscom_poll_pause(idle);
            if (pscom_config.sched_yield)
                sched_yield();
            pscom_lock();
        } else {
            pscom_poll_pause(idle);
            if (pscom_config.sched_yield)
                sched_yield();
        }
        if (++idle < 64)
            continue;
        /* idle: after 20 us, let other ranks of an oversubscribed node run (sched_yield
           returns at once when no one else wants the CPU); after spin_us, block: waking a
           blocked process costs far more than a yield, especially on virtual machines */
        uint64_t now = now_us();
        if (!idle_since)
            idle_since = now;
        uint64_t waited = now - idle_since;
        if (waited < 20)
            continue;
        if (waited < pscom_config.spin_us) {
            if (!pscom_config.sched_yield && !pscom_global.threaded)
                sched_yield();
            continue;
        }
        if (done(arg))
            break;
        pscom_progress_block(1000);
        idle_since = 0;
    }
}

static unsigned idle_polls; /* of pscom_progress(0) in a row: callers poll in a loop */

/* pscom_progress with a timeout, or threaded */
static __attribute__((noinline)) int progress_locked(int timeout_ms)
{
    unsigned idle = 0;
    pscom_lock();
    int made = pscom_progress_poll();
    if (!made && timeout_ms != 0) {
        pscom_progress_block(timeout_ms < 0 ? 1000 : timeout_ms);
        made = pscom_progress_poll();
    }
    if (made)
        idle_polls = 0;
    else if (timeout_ms == 0 && (idle = idle_polls) < UINT_MAX)
        idle_polls++;
    pscom_unlock();
    if (!made && timeout_ms == 0)
        pscom_poll_pause(idle); /* outside the lock: other threads go on meanwhile */
    return made;
}

PSCOM_API int pscom_progress(int timeout_ms)
{
    if (unlikely(timeout_ms != 0 || pscom_global.threaded))
        return progress_locked(timeout_ms);
    /* the MPI progress loop's case: one poll (inline), the pause once idle */
    int made = progress_poll();
    if (made) {
        idle_polls = 0;
        return made;
    }
    unsigned idle = idle_polls;
    idle_polls = idle + (idle < UINT_MAX);
    pscom_poll_pause(idle);
    if (unlikely((idle & 0xfffff) == 0xfffff)) /* long idle (about 0.1 s): held up by credit? */
        pscom_fc_check_stalls();
    return 0;
}
