/*
 * Plugin registry. Every plugin registers itself (PSCOM_PLUGIN_DEFINE, a constructor): the
 * built-in ones when libpscom is loaded, a loadable one (libpscom4<name>.so in PSP_PLUGINDIR,
 * then the directory libpscom itself was loaded from) when core dlopens it. Core knows no
 * plugin by name. Each plugin gets two generated configuration rows, PSP_<NAME> (0 = off, N =
 * user priority) and PSP_<NAME>_RENDEZVOUS, next to its own rows.
 *
 * A library whose libpscom4<name>.conf (the plugin directory's plugin.conf, installed next to
 * it) says load=first-use and gives its priority is loaded and initialised when a connection
 * first asks for it (in priority order), not at pscom_init: a job whose peers all take shm
 * never loads UCX (6.7 MiB of resident memory per process, and its start-up time). Its rows
 * (PSP_UCP_*) are known from then on; pscom_plugin_info (pscom_info) loads them all first. A
 * library without a .conf, or with load=init, is loaded at pscom_init.
 */
#include <ctype.h>
#include <dlfcn.h>
#include <glob.h>
#include <libgen.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "pscom_priv.h"

#define MAX_PLUGINS 16

typedef struct plugin_slot {
    char name[16];
    const pscom_plugin_t *plugin; /* NULL if not loaded */
    void *dl;
    int priority; /* the plugin's, or its .conf's before it is loaded */
    int deferred; /* listed as usable, loaded and initialised on first use */
    int refused;  /* registered with another plugin API version */
    int user_prio;
    size_t rendezvous;
    int available;
    char status[160];
    char var_prio[32], var_rndv[48], help_prio[96], help_rndv[128], deflt_rndv[32];
    pscom_env_row_t rows[3];
} plugin_slot_t;

static plugin_slot_t slots[MAX_PLUGINS];
static int n_slots;
static int order[MAX_PLUGINS]; /* usable plugins, best first */
static int n_order;
static int initialized;        /* pscom_plugins_init ran: slots hold registered rows now */
static plugin_slot_t *loading; /* the slot whose library is being dlopen'ed */

static plugin_slot_t *slot_by_name(const char *name)
{
    for (int i = 0; i < n_slots; i++)
        if (!strcmp(slots[i].name, name))
            return &slots[i];
    return NULL;
}

/* higher priority first, then by name: the order does not depend on the order of linking */
static int slot_before(int prio_a, const char *name_a, int prio_b, const char *name_b)
{
    return prio_a != prio_b ? prio_a > prio_b : strcmp(name_a, name_b) < 0;
}

void pscom_plugin_register(const pscom_plugin_t *p)
{
    /* name and api_version are where every version of the descriptor has them */
    if (!p || !p->name || !p->name[0] || strlen(p->name) >= sizeof(slots[0].name))
        return;
    int refused = p->api_version != PSCOM_PLUGIN_API_VERSION;
    plugin_slot_t *s;
    if (loading) {
        /* a library registers the plugin it was loaded for, nothing else */
        if (strcmp(p->name, loading->name) != 0)
            return; /* try_load then says that no plugin registered */
        s = loading;
    } else if (initialized) {
        /* loaded behind core's back: rows and selection order are made */
        PSCOM_LOG(1, "plugin %s registered after pscom_init: ignored", p->name);
        return;
    } else {
        /* a constructor at load time (libpscom's, or a plugin library linked into the
           program): before any rows point into slots[], so they may move */
        if (slot_by_name(p->name) || n_slots == MAX_PLUGINS)
            return;
        int prio = refused ? 0 : p->priority, at = n_slots;
        while (at > 0 && !slot_before(slots[at - 1].priority, slots[at - 1].name, prio, p->name))
            at--;
        memmove(&slots[at + 1], &slots[at], (size_t)(n_slots - at) * sizeof(slots[0]));
        n_slots++;
        s = &slots[at];
        memset(s, 0, sizeof(*s));
        snprintf(s->name, sizeof(s->name), "%s", p->name);
        s->priority = prio;
        snprintf(s->status, sizeof(s->status), "built in");
    }
    if (refused) {
        s->refused = 1;
        snprintf(s->status, sizeof(s->status), "refused: plugin API version 0x%04x, core's 0x%04x",
                 p->api_version, PSCOM_PLUGIN_API_VERSION);
        return;
    }
    s->plugin = p;
}

void pscom_plugin_set_status(const char *name, const char *fmt, ...)
{
    plugin_slot_t *s = slot_by_name(name);
    if (!s)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->status, sizeof(s->status), fmt, ap);
    va_end(ap);
}

static void register_rows(plugin_slot_t *s)
{
    char upper[16];
    size_t i;
    for (i = 0; s->name[i] && i < sizeof(upper) - 1; i++)
        upper[i] = (char)toupper((unsigned char)s->name[i]);
    upper[i] = '\0';
    size_t def = s->plugin ? s->plugin->rendezvous : SIZE_MAX;
    if (pscom_config.rendezvous.set)
        def = pscom_config.rendezvous.value;
    if (def == SIZE_MAX)
        snprintf(s->deflt_rndv, sizeof(s->deflt_rndv), "inf");
    else
        snprintf(s->deflt_rndv, sizeof(s->deflt_rndv), "%zu", def);
    snprintf(s->var_prio, sizeof(s->var_prio), "PSP_%s", upper);
    snprintf(s->var_rndv, sizeof(s->var_rndv), "PSP_%s_RENDEZVOUS", upper);
    snprintf(s->help_prio, sizeof(s->help_prio),
             "Use the %s transport: 0 off, N user priority (higher is tried first).", s->name);
    snprintf(s->help_rndv, sizeof(s->help_rndv),
             "Messages of at least this many bytes go by rendezvous over %s (inf: never).",
             s->name);
    s->rows[0] =
        (pscom_env_row_t){s->var_prio, "1", s->help_prio, PSCOM_ENV_INT, &s->user_prio, 0, 1000};
    s->rows[1] = (pscom_env_row_t){
        s->var_rndv, s->deflt_rndv, s->help_rndv, PSCOM_ENV_SIZE, &s->rendezvous, 0, 0};
    s->rows[2] = (pscom_env_row_t){NULL, NULL, NULL, 0, NULL, 0, 0};
    pscom_env_register(s->name, s->rows);
}

static const char *self_dir(void)
{
    static char dir[4096];
    Dl_info info;
    if (!dir[0] && dladdr((void *)&pscom_plugins_init, &info) && info.dli_fname) {
        snprintf(dir, sizeof(dir), "%s", info.dli_fname);
        char *d = dirname(dir);
        memmove(dir, d, strlen(d) + 1);
    }
    return dir;
}

static void try_load(plugin_slot_t *s)
{
    const char *dirs[2] = {pscom_config.plugindir, self_dir()};
    char path[4200], tried[160] = "";
    for (int i = 0; i < 2; i++) {
        if (!dirs[i] || !*dirs[i])
            continue;
        snprintf(path, sizeof(path), "%s/libpscom4%s.so", dirs[i], s->name);
        /* its constructor registers the plugin into s (pscom_plugin_register) */
        s->refused = 0;
        loading = s;
        void *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        loading = NULL;
        if (!dl) {
            const char *err = dlerror();
            /* a library that exists but does not load says why (e.g. libucp missing: that
               error says "No such file" too, but names libucp) */
            if (err && access(path, F_OK) == 0)
                snprintf(tried, sizeof(tried), "%s", err);
            continue;
        }
        if (!s->plugin) {
            if (s->refused)
                snprintf(tried, sizeof(tried), "%s: %s", path, s->status);
            else
                snprintf(tried, sizeof(tried), "%s: no plugin %s registered", path, s->name);
            dlclose(dl);
            continue;
        }
        s->dl = dl;
        snprintf(s->status, sizeof(s->status), "loaded from %s", path);
        return;
    }
    if (tried[0])
        snprintf(s->status, sizeof(s->status), "%s", tried);
    else
        snprintf(s->status, sizeof(s->status), "not installed (libpscom4%s.so not found)", s->name);
}

/* libpscom4<name>.conf next to the library (its plugin directory's plugin.conf): lines
   name=<name>, priority=<n>, load=first-use|init. Waiting for the first use needs the
   priority: it places the plugin in the selection order before it is loaded. */
static void read_conf(const char *so, plugin_slot_t *s)
{
    char path[4200], line[256], name[16] = "", load[16] = "";
    int prio = 0, have_prio = 0;
    snprintf(path, sizeof(path), "%.*s.conf", (int)(strlen(so) - strlen(".so")), so);
    FILE *f = fopen(path, "r");
    if (!f)
        return; /* loaded at init: its priority is known only then */
    while (fgets(line, sizeof(line), f)) {
        char *key = line, *end = line + strlen(line);
        while (end > key && isspace((unsigned char)end[-1]))
            *--end = '\0';
        while (isspace((unsigned char)*key))
            key++;
        char *val = strchr(key, '=');
        if (*key == '#' || !val)
            continue;
        *val++ = '\0';
        if (!strcmp(key, "name")) {
            snprintf(name, sizeof(name), "%s", val);
        } else if (!strcmp(key, "load")) {
            snprintf(load, sizeof(load), "%s", val);
        } else if (!strcmp(key, "priority")) {
            char *e;
            long v = strtol(val, &e, 10);
            have_prio = e != val && !*e && v >= 0 && v <= 1000;
            prio = have_prio ? (int)v : 0;
        } /* other keys: for a later core */
    }
    fclose(f);
    if (name[0] && strcmp(name, s->name) != 0) {
        PSCOM_LOG(1, "%s: name=%s, but the library is libpscom4%s.so: loaded at init", path, name,
                  s->name);
        return;
    }
    if (have_prio)
        s->priority = prio; /* compared with the plugin's when it is loaded */
    if (!strcmp(load, "first-use") && have_prio)
        s->deferred = 1;
    else if (load[0] && (strcmp(load, "init") != 0 || !have_prio))
        PSCOM_LOG(1, "%s: load=%s%s: loaded at init", path, load,
                  have_prio ? "" : " without a priority");
}

/* libpscom4<name>.so files in the plugin directories whose plugin has not registered yet */
static void add_found_plugins(void)
{
    const char *dirs[2] = {pscom_config.plugindir, self_dir()};
    for (int d = 0; d < 2; d++) {
        if (!dirs[d] || !*dirs[d])
            continue;
        char pattern[4200];
        glob_t gl;
        snprintf(pattern, sizeof(pattern), "%s/libpscom4*.so", dirs[d]);
        if (glob(pattern, 0, NULL, &gl) != 0)
            continue;
        for (size_t i = 0; i < gl.gl_pathc && n_slots < MAX_PLUGINS; i++) {
            const char *base = strrchr(gl.gl_pathv[i], '/');
            base = base ? base + 1 : gl.gl_pathv[i];
            char name[16];
            size_t len = strlen(base) - strlen("libpscom4") - strlen(".so");
            if (len == 0 || len >= sizeof(name))
                continue;
            memcpy(name, base + strlen("libpscom4"), len);
            name[len] = '\0';
            int ok = 1;
            for (size_t k = 0; k < len; k++)
                ok &= isalnum((unsigned char)name[k]) != 0;
            if (!ok || slot_by_name(name))
                continue;
            plugin_slot_t *s = &slots[n_slots++];
            snprintf(s->name, sizeof(s->name), "%s", name);
            read_conf(gl.gl_pathv[i], s);
        }
        globfree(&gl);
    }
}

static void sort_order(void)
{
    n_order = 0;
    for (int i = 0; i < n_slots; i++)
        if (slots[i].available)
            order[n_order++] = i;
    for (int i = 1; i < n_order; i++) /* insertion sort: user prio, built-in prio, name */
        for (int j = i; j > 0; j--) {
            plugin_slot_t *a = &slots[order[j - 1]], *b = &slots[order[j]];
            if (a->user_prio != b->user_prio
                    ? a->user_prio > b->user_prio
                    : !slot_before(b->priority, b->name, a->priority, a->name))
                break;
            int t = order[j - 1];
            order[j - 1] = order[j];
            order[j] = t;
        }
}

/* Find the library if needed, register the plugin's rows, run its init. */
static void activate(plugin_slot_t *s)
{
    s->deferred = 0;
    if (!s->plugin)
        try_load(s);
    if (!s->plugin) {
        s->available = 0;
        return;
    }
    if (s->priority && s->plugin->priority != s->priority)
        PSCOM_LOG(1, "%s: plugin priority %d, listed as %d (selection order kept)", s->name,
                  s->plugin->priority, s->priority);
    s->priority = s->plugin->priority;
    if (s->plugin->env)
        pscom_env_register(s->name, s->plugin->env);
    /* the threshold may depend on the plugin's own rows: re-read after registering them */
    if (!pscom_env_is_set(s->var_rndv) && !pscom_config.rendezvous.set)
        s->rendezvous = s->plugin->rendezvous;
    s->available = !s->plugin->init || s->plugin->init() == 0;
}

void pscom_plugins_init(void)
{
    if (initialized)
        return;
    initialized = 1;
    add_found_plugins();
    for (int i = 0; i < n_slots; i++) {
        plugin_slot_t *s = &slots[i];
        if (!s->deferred && !s->plugin && !s->refused)
            try_load(s); /* loaded at init anyway: its descriptor gives the rows' defaults */
        register_rows(s);
        if (s->user_prio == 0) {
            snprintf(s->status + strlen(s->status), sizeof(s->status) - strlen(s->status),
                     "%sdisabled by %s=0", s->status[0] ? "; " : "", s->var_prio);
            continue;
        }
        if (s->refused) {
            s->available = 0;
            continue;
        }
        if (s->deferred) {
            s->available = 1; /* until its load or init fails */
            snprintf(s->status, sizeof(s->status), "loaded on first use");
            continue;
        }
        activate(s);
    }
    sort_order();
}

/* every deferred transport now (pscom_info: real status, all configuration rows) */
void pscom_plugins_activate_all(void)
{
    for (int i = 0; i < n_slots; i++)
        if (slots[i].deferred && slots[i].available)
            activate(&slots[i]);
}

void pscom_plugins_destroy(void)
{
    for (int i = 0; i < n_slots; i++) {
        if (slots[i].available && !slots[i].deferred && slots[i].plugin->destroy)
            slots[i].plugin->destroy();
        slots[i].available = 0;
    }
    n_order = 0;
}

void pscom_plugin_dump(FILE *out)
{
    for (int i = 0; i < n_slots; i++)
        if (slots[i].available && !slots[i].deferred && slots[i].plugin->dump) {
            fprintf(out, "transport %s:\n", slots[i].name);
            slots[i].plugin->dump(out);
        }
}

/* ", shm ring full 0 doorbells 15, tcp short writes 0": the loaded plugins' own counters
   after core's (PSP_DEBUG_STATS, and the SIGQUIT dump: no allocation) */
void pscom_plugin_counters(char *buf, size_t len)
{
    size_t n = 0;
    buf[0] = '\0';
    for (int i = 0; i < n_slots && n < len; i++) {
        const pscom_plugin_t *p = slots[i].plugin;
        if (!p || !p->counters || !p->counters[0].name)
            continue;
        n += (size_t)snprintf(buf + n, len - n, ", %s", p->name);
        for (const pscom_counter_t *c = p->counters; c->name && n < len; c++)
            n += (size_t)snprintf(buf + n, len - n, " %s %llu", c->name,
                                  (unsigned long long)*c->value);
    }
}

int pscom_plugin_count(void)
{
    return n_order;
}

const pscom_plugin_t *pscom_plugin_get(int index)
{
    if (index >= n_order)
        return NULL;
    plugin_slot_t *s = &slots[order[index]];
    if (s->deferred) {
        activate(s);
        PSCOM_LOG(2, "%s: loaded on first use: %s", s->name, s->available ? "usable" : s->status);
    }
    return s->available ? s->plugin : NULL;
}

/* The transport that may match a socket's tagged messages: the one enabled besides loop (whose
   connections it then takes over), if it offers tag matching. */
const pscom_plugin_t *pscom_plugin_tag_transport(char *why, size_t whylen)
{
    const pscom_plugin_t *only = NULL;
    const char *first = NULL;
    int index = -1;
    /* Counted by name first: asking would load a deferred plugin (ucp: UCX's context, worker and
       4 MiB of its shared memory in every process) that a job within one node never uses. */
    for (int i = 0; i < n_order; i++) {
        const plugin_slot_t *s = &slots[order[i]];
        if (!s->deferred && (!s->available || (s->plugin->flags & PSCOM_PLUGIN_SELF)))
            continue; /* not the user's choice of transport: the process's own loopback */
        if (first) {
            snprintf(why, whylen, "transports %s and %s are enabled (only one may be)", first,
                     s->name);
            return NULL;
        }
        first = s->name;
        index = i;
    }
    if (index >= 0)
        only = pscom_plugin_get(index);
    if (!only) {
        snprintf(why, whylen, first ? "transport %s is not usable" : "no transport enabled", first);
        return NULL;
    }
    if (!only->tag) {
        snprintf(why, whylen, "transport %s does not match tags", only->name);
        return NULL;
    }
    return only->tag->usable(why, whylen) ? only : NULL;
}

const pscom_plugin_t *pscom_plugin_relay(int index)
{
    for (int i = 0; i < n_order; i++) {
        plugin_slot_t *s = &slots[order[i]];
        if (s->available && !s->deferred && s->plugin->con_relay && index-- == 0)
            return s->plugin;
    }
    return NULL;
}

int pscom_plugin_index(const char *name)
{
    for (int i = 0; i < n_order; i++)
        if (!strcmp(slots[order[i]].name, name))
            return i;
    return -1;
}

size_t pscom_plugin_rendezvous(const pscom_plugin_t *plugin)
{
    plugin_slot_t *s = slot_by_name(plugin->name);
    return s ? s->rendezvous : SIZE_MAX;
}

/* Did the user choose this transport's threshold (PSP_RENDEZVOUS or PSP_<NAME>_RENDEZVOUS)? */
int pscom_plugin_rendezvous_user_set(const pscom_plugin_t *plugin)
{
    plugin_slot_t *s = slot_by_name(plugin->name);
    return pscom_config.rendezvous.set || (s && pscom_env_is_set(s->var_rndv));
}

PSCOM_API int pscom_plugin_info(int index, pscom_plugin_info_t *info)
{
    pscom_lock();
    pscom_plugins_activate_all();
    /* usable ones in selection order first, then the rest */
    int idx = -1, k = 0;
    for (int i = 0; i < n_order; i++)
        if (slots[order[i]].available && k++ == index)
            idx = order[i];
    for (int i = 0; idx < 0 && i < n_slots; i++)
        if (!slots[i].available && k++ == index)
            idx = i;
    if (idx < 0) {
        pscom_unlock();
        return -1;
    }
    plugin_slot_t *s = &slots[idx];
    memset(info, 0, sizeof(*info));
    snprintf(info->name, sizeof(info->name), "%s", s->name);
    info->priority = s->plugin ? s->plugin->priority : s->priority;
    info->user_prio = s->user_prio;
    info->available = s->available;
    info->rendezvous = s->rendezvous;
    snprintf(info->status, sizeof(info->status), "%s", s->status);
    pscom_unlock();
    return 0;
}
