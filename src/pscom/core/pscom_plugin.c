/*
 * Plugin registry: built-in transports plus libpscom4<name>.so loaded with dlopen from
 * PSP_PLUGINDIR, then the directory libpscom itself was loaded from. Each plugin gets two
 * generated configuration rows, PSP_<NAME> (0 = off, N = user priority) and
 * PSP_<NAME>_RENDEZVOUS, next to its own rows.
 *
 * The transports of `loadable` are loaded and initialised when a connection first asks for
 * them (in priority order), not at pscom_init: a job whose peers all take shm never loads UCX
 * (6.7 MiB of resident memory per process, and its start-up time). Their rows (PSP_UCP_*) are
 * known from then on; pscom_plugin_info (pscom_info) loads them all first.
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

extern const pscom_plugin_t pscom_plugin_loop;
extern const pscom_plugin_t pscom_plugin_shm;
extern const pscom_plugin_t pscom_plugin_tcp;

static const pscom_plugin_t *const builtin[] = {&pscom_plugin_loop, &pscom_plugin_shm,
                                                &pscom_plugin_tcp};
/* transports that live in their own library, with the priority they declare: always listed
   (pscom_info says why one is missing), loaded on first use. Any other libpscom4<name>.so
   found in the plugin directories is added and loaded at init (its priority is not known). */
static const struct {
    const char *name;
    int priority;
} loadable[] = {{"ucp", 50}};

#define MAX_PLUGINS 8

typedef struct plugin_slot {
    char name[16];
    const pscom_plugin_t *plugin; /* NULL if not loaded */
    void *dl;
    int priority; /* the plugin's, or loadable[]'s before it is loaded */
    int deferred; /* listed as usable, loaded and initialised on first use */
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

static plugin_slot_t *slot_by_name(const char *name)
{
    for (int i = 0; i < n_slots; i++)
        if (!strcmp(slots[i].name, name))
            return &slots[i];
    return NULL;
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
    char path[4200], sym[64], tried[160] = "";
    snprintf(sym, sizeof(sym), "pscom_plugin_%s", s->name);
    for (int i = 0; i < 2; i++) {
        if (!dirs[i] || !*dirs[i])
            continue;
        snprintf(path, sizeof(path), "%s/libpscom4%s.so", dirs[i], s->name);
        void *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (!dl) {
            const char *err = dlerror();
            /* a library that exists but does not load says why (e.g. libucp missing: that
               error says "No such file" too, but names libucp) */
            if (err && access(path, F_OK) == 0)
                snprintf(tried, sizeof(tried), "%s", err);
            continue;
        }
        const pscom_plugin_t *p = dlsym(dl, sym);
        if (!p || p->api_version != PSCOM_PLUGIN_API_VERSION) {
            snprintf(tried, sizeof(tried), "%s: %s", path,
                     p ? "plugin API version mismatch" : "no plugin symbol");
            dlclose(dl);
            continue;
        }
        s->plugin = p;
        s->dl = dl;
        snprintf(s->status, sizeof(s->status), "loaded from %s", path);
        return;
    }
    snprintf(s->status, sizeof(s->status), "%s",
             tried[0] ? tried : "not installed (libpscom4<name>.so not found)");
    if (!tried[0])
        snprintf(s->status, sizeof(s->status), "not installed (libpscom4%s.so not found)", s->name);
}

/* libpscom4<name>.so files in the plugin directories that are not listed yet */
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
            if (ok && !slot_by_name(name))
                snprintf(slots[n_slots++].name, sizeof(slots[0].name), "%s", name);
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
    for (int i = 1; i < n_order; i++) /* insertion sort: user prio, then built-in prio */
        for (int j = i; j > 0; j--) {
            plugin_slot_t *a = &slots[order[j - 1]], *b = &slots[order[j]];
            if (a->user_prio > b->user_prio ||
                (a->user_prio == b->user_prio && a->priority >= b->priority))
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

/* a loadable transport's library in one of the plugin directories? */
static int library_found(const char *name)
{
    const char *dirs[2] = {pscom_config.plugindir, self_dir()};
    char path[4200];
    for (int i = 0; i < 2; i++) {
        snprintf(path, sizeof(path), "%s/libpscom4%s.so", dirs[i] ? dirs[i] : "", name);
        if (dirs[i] && *dirs[i] && access(path, R_OK) == 0)
            return 1;
    }
    return 0;
}

void pscom_plugins_init(void)
{
    if (n_slots)
        return;
    for (size_t i = 0; i < sizeof(builtin) / sizeof(builtin[0]); i++) {
        plugin_slot_t *s = &slots[n_slots++];
        snprintf(s->name, sizeof(s->name), "%s", builtin[i]->name);
        s->plugin = builtin[i];
        s->priority = builtin[i]->priority;
        snprintf(s->status, sizeof(s->status), "built in");
    }
    for (size_t i = 0; i < sizeof(loadable) / sizeof(loadable[0]); i++) {
        plugin_slot_t *s = &slots[n_slots++];
        snprintf(s->name, sizeof(s->name), "%s", loadable[i].name);
        s->priority = loadable[i].priority;
        s->deferred = 1;
    }
    add_found_plugins();
    for (int i = 0; i < n_slots; i++) {
        plugin_slot_t *s = &slots[i];
        register_rows(s);
        if (s->user_prio == 0) {
            snprintf(s->status + strlen(s->status), sizeof(s->status) - strlen(s->status),
                     "%sdisabled by %s=0", s->status[0] ? "; " : "", s->var_prio);
            continue;
        }
        if (s->deferred && library_found(s->name)) {
            s->available = 1; /* until its load or init fails */
            snprintf(s->status, sizeof(s->status), "loaded on first use");
            continue;
        }
        activate(s);
    }
    sort_order();
}

/* every deferred transport now (pscom_info: real status, all configuration rows) */
static void activate_all(void)
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
    for (int i = 0; i < n_order; i++) {
        const pscom_plugin_t *p = pscom_plugin_get(i);
        if (!p || p == &pscom_plugin_loop)
            continue; /* not the user's choice of transport: the process's own loopback */
        if (only) {
            snprintf(why, whylen, "transports %s and %s are enabled (only one may be)", only->name,
                     p->name);
            return NULL;
        }
        only = p;
    }
    if (!only) {
        snprintf(why, whylen, "no transport enabled");
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
    activate_all();
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
