/* Intrusive doubly linked lists (circular, with a head node), all inline: core's, and through
   pscom_plugin.h the plugins'. */
#ifndef PSCOM_LIST_H_INCLUDED
#define PSCOM_LIST_H_INCLUDED

#include <stddef.h>

typedef struct list_head {
    struct list_head *next, *prev;
} list_head_t;

#define LIST_HEAD_INIT(name)                                                                       \
    {                                                                                              \
        &(name), &(name)                                                                           \
    }

static inline void list_init(list_head_t *h)
{
    h->next = h;
    h->prev = h;
}

static inline int list_empty(const list_head_t *h)
{
    return h->next == h;
}

static inline void list_add_tail(list_head_t *e, list_head_t *h)
{
    e->prev = h->prev;
    e->next = h;
    h->prev->next = e;
    h->prev = e;
}

static inline void list_del(list_head_t *e)
{
    e->prev->next = e->next;
    e->next->prev = e->prev;
    e->next = e;
    e->prev = e;
}

/* Move all entries of from to the end of to, in order; from is empty afterwards. */
static inline void list_splice_tail_init(list_head_t *from, list_head_t *to)
{
    if (list_empty(from))
        return;
    from->next->prev = to->prev;
    to->prev->next = from->next;
    from->prev->next = to;
    to->prev = from->prev;
    list_init(from);
}

/* Is e linked into some list? (requires list_init or list_del before first use) */
static inline int list_linked(const list_head_t *e)
{
    return e->next != e;
}

#define list_entry(ptr, type, member) ((type *)((char *)(ptr)-offsetof(type, member)))

#define list_for_each(pos, head) for (pos = (head)->next; pos != (head); pos = pos->next)

#define list_for_each_safe(pos, tmp, head)                                                         \
    for (pos = (head)->next, tmp = pos->next; pos != (head); pos = tmp, tmp = pos->next)

#endif
