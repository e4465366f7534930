/*
 * fake_nvml.c: a scriptable stand-in for libnvidia-ml.so.1.
 *
 * It exports the NVML symbols node-nvml-bindings calls, with the real names and
 * signatures, so tests and the agent's dev mode go through the same koffi code
 * path as on a GPU host. What it reports comes from, in order:
 *   FAKE_NVML_STATE=<file>          a "key=value" state file (see the package
 *                                   README), re-read whenever it changes;
 *   FAKE_NVML_GPUS=<count>[x<name>] that many GPUs with default values;
 *   neither                         no GPUs.
 * Every call takes one mutex: koffi runs nvmlEventSetWait_v2 on a worker thread
 * while the main thread reads devices.
 */
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

typedef int nvmlReturn_t;
enum {
    NVML_SUCCESS = 0,
    NVML_ERROR_UNINITIALIZED = 1,
    NVML_ERROR_INVALID_ARGUMENT = 2,
    NVML_ERROR_NOT_SUPPORTED = 3,
    NVML_ERROR_INSUFFICIENT_SIZE = 7,
    NVML_ERROR_TIMEOUT = 10,
    NVML_ERROR_UNKNOWN = 999,
};

#define MAX_GPUS 8
#define MAX_EVENTS 256
#define EVENT_ECC_SINGLE 0x1ULL
#define EVENT_ECC_DOUBLE 0x2ULL
#define EVENT_XID 0x8ULL

/* What a state file can make fail: "gpu.N.unsupported=" and "gpu.N.error.<field>=". */
enum field {
    F_NAME, F_UUID, F_PCI_BUS_ID, F_MEMORY, F_UTILIZATION, F_TEMPERATURE,
    F_POWER_USAGE, F_POWER_LIMIT, F_CLOCK_SM, F_CLOCK_MEM, F_ECC,
    F_RETIRED_PAGES, F_REMAPPED_ROWS, F_THROTTLE_REASONS, F_EVENTS, F_RECOVERY_ACTION, F_COUNT
};
static const char *const field_names[F_COUNT] = {
    "name", "uuid", "pci_bus_id", "memory", "utilization", "temperature",
    "power_usage", "power_limit", "clock_sm", "clock_mem", "ecc",
    "retired_pages", "remapped_rows", "throttle_reasons", "events", "recovery_action",
};

/* nvmlDevice_t is a pointer into the gpus array, so a handle survives reloads. */
typedef struct nvmlDevice_st {
    char name[96], uuid[96], pci_bus_id[32];
    unsigned long long memory_total, memory_used;
    unsigned utilization_gpu, utilization_memory, temperature;
    unsigned power_usage, power_limit, clock_sm, clock_mem;
    unsigned long long ecc_corrected_volatile, ecc_uncorrected_volatile;
    unsigned long long ecc_corrected_aggregate, ecc_uncorrected_aggregate;
    unsigned retired_pages_sbe, retired_pages_dbe;
    unsigned remapped_corrected, remapped_uncorrected, remapped_pending, remapped_failure;
    unsigned long long throttle_reasons;
    unsigned recovery_action; /* nvmlDeviceGpuRecoveryAction_t, NVML_FI_DEV_GET_GPU_RECOVERY_ACTION */
    int fail[F_COUNT]; /* NVML return code forced for a field; 0 = works */
} *nvmlDevice_t;

/* The settable per-GPU values, by state-file key. */
static const struct gpu_key {
    const char *key;
    size_t offset;
    char kind; /* 's' string, 'u' unsigned int, 'U' unsigned long long */
    size_t size;
} gpu_keys[] = {
#define STR(m) { #m, offsetof(struct nvmlDevice_st, m), 's', sizeof(((nvmlDevice_t)0)->m) }
#define U32(m) { #m, offsetof(struct nvmlDevice_st, m), 'u', 0 }
#define U64(m) { #m, offsetof(struct nvmlDevice_st, m), 'U', 0 }
    STR(name), STR(uuid), STR(pci_bus_id),
    U64(memory_total), U64(memory_used),
    U32(utilization_gpu), U32(utilization_memory), U32(temperature),
    U32(power_usage), U32(power_limit), U32(clock_sm), U32(clock_mem),
    U64(ecc_corrected_volatile), U64(ecc_uncorrected_volatile),
    U64(ecc_corrected_aggregate), U64(ecc_uncorrected_aggregate),
    U32(retired_pages_sbe), U32(retired_pages_dbe),
    U32(remapped_corrected), U32(remapped_uncorrected),
    U32(remapped_pending), U32(remapped_failure),
    U64(throttle_reasons), U32(recovery_action),
#undef STR
#undef U32
#undef U64
};

struct event { unsigned long long seq, type, data; unsigned gpu; };

static struct {
    char driver_version[80];
    int cuda_version;
    int init_error;
    unsigned gpu_count;
    struct nvmlDevice_st gpus[MAX_GPUS];
    unsigned event_count;
    struct event events[MAX_EVENTS];
} st;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int init_count;             /* nvmlInit_v2 minus nvmlShutdown calls */
static char loaded_path[4096];     /* state file last parsed ... */
static struct stat loaded_stat;    /* ... and its identity then */
static nvmlReturn_t loaded_result; /* NVML_ERROR_UNKNOWN when it did not parse */
/* Highest event seq delivered per GPU. Kept in "<state file>.consumed" as well,
 * so an event is delivered once even across an agent restart or a dlclose. */
static unsigned long long consumed_seq[MAX_GPUS];
static char consumed_path[4096 + 16];

static void set_defaults(unsigned count, const char *name)
{
    memset(&st, 0, sizeof st);
    snprintf(st.driver_version, sizeof st.driver_version, "550.54.15");
    st.cuda_version = 12040;
    st.gpu_count = count > MAX_GPUS ? MAX_GPUS : count;
    for (unsigned i = 0; i < MAX_GPUS; i++) {
        nvmlDevice_t g = &st.gpus[i];
        snprintf(g->name, sizeof g->name, "%s", name);
        snprintf(g->uuid, sizeof g->uuid, "GPU-00000000-0000-4000-8000-%012x", i);
        snprintf(g->pci_bus_id, sizeof g->pci_bus_id, "00000000:%02X:00.0", 0x18 + i);
        g->memory_total = 85520809984ULL; /* 81559 MiB, as an H100 80GB reports */
        g->memory_used = 536870912ULL;
        g->temperature = 35;
        g->power_usage = 70000;  /* mW */
        g->power_limit = 700000; /* mW */
        g->clock_sm = 1980;
        g->clock_mem = 2619;
        g->throttle_reasons = 0x1; /* GpuIdle */
    }
}

static int field_by_name(const char *name)
{
    for (int f = 0; f < F_COUNT; f++)
        if (strcmp(field_names[f], name) == 0) return f;
    return -1;
}

static unsigned long long event_type_by_name(const char *name)
{
    if (strcmp(name, "xid") == 0) return EVENT_XID;
    if (strcmp(name, "ecc_single") == 0) return EVENT_ECC_SINGLE;
    if (strcmp(name, "ecc_double") == 0) return EVENT_ECC_DOUBLE;
    return 0;
}

/* One "gpu.N.<key>=<value>" line; returns 0 on success. */
static int parse_gpu_line(nvmlDevice_t g, const char *key, const char *value)
{
    if (strcmp(key, "unsupported") == 0) {
        char list[512];
        snprintf(list, sizeof list, "%s", value);
        for (char *save, *tok = strtok_r(list, ", ", &save); tok; tok = strtok_r(NULL, ", ", &save)) {
            int f = field_by_name(tok);
            if (f < 0) return -1;
            g->fail[f] = NVML_ERROR_NOT_SUPPORTED;
        }
        return 0;
    }
    if (strncmp(key, "error.", 6) == 0) {
        int f = field_by_name(key + 6);
        if (f < 0) return -1;
        g->fail[f] = (int)strtol(value, NULL, 0);
        return 0;
    }
    for (size_t k = 0; k < sizeof gpu_keys / sizeof gpu_keys[0]; k++) {
        const struct gpu_key *gk = &gpu_keys[k];
        if (strcmp(gk->key, key) != 0) continue;
        char *dst = (char *)g + gk->offset;
        if (gk->kind == 's') snprintf(dst, gk->size, "%s", value);
        else if (gk->kind == 'u') *(unsigned *)dst = (unsigned)strtoul(value, NULL, 0);
        else *(unsigned long long *)dst = strtoull(value, NULL, 0);
        return 0;
    }
    return -1;
}

static int parse_line(char *line)
{
    char *eq = strchr(line, '=');
    if (!eq) return -1;
    *eq = 0;
    const char *key = line, *value = eq + 1;
    unsigned idx;
    int used = 0;

    if (strcmp(key, "gpus") == 0) {
        unsigned n = (unsigned)strtoul(value, NULL, 10);
        st.gpu_count = n > MAX_GPUS ? MAX_GPUS : n;
    } else if (strcmp(key, "driver_version") == 0) {
        snprintf(st.driver_version, sizeof st.driver_version, "%s", value);
    } else if (strcmp(key, "cuda_version") == 0) {
        st.cuda_version = (int)strtol(value, NULL, 10);
    } else if (strcmp(key, "init_error") == 0) {
        st.init_error = (int)strtol(value, NULL, 0);
    } else if (strcmp(key, "event") == 0) {
        /* event=<seq> <gpu> <xid|ecc_single|ecc_double> <data> */
        struct event e;
        char type[16];
        if (st.event_count >= MAX_EVENTS) return -1;
        if (sscanf(value, "%llu %u %15s %llu", &e.seq, &e.gpu, type, &e.data) != 4) return -1;
        e.type = event_type_by_name(type);
        if (!e.type || e.gpu >= MAX_GPUS) return -1;
        st.events[st.event_count++] = e;
    } else if (sscanf(key, "gpu.%u.%n", &idx, &used) == 1 && used > 0 && idx < MAX_GPUS) {
        return parse_gpu_line(&st.gpus[idx], key + used, value);
    } else {
        return -1;
    }
    return 0;
}

static nvmlReturn_t parse_state_file(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "fake-nvml: cannot open FAKE_NVML_STATE %s\n", path);
        return NVML_ERROR_UNKNOWN;
    }
    set_defaults(0, "NVIDIA H100 80GB HBM3");
    char line[1024];
    nvmlReturn_t rc = NVML_SUCCESS;
    for (unsigned n = 1; fgets(line, sizeof line, f); n++) {
        line[strcspn(line, "\r\n")] = 0;
        if (line[0] == 0 || line[0] == '#') continue;
        if (parse_line(line) != 0) {
            fprintf(stderr, "fake-nvml: %s:%u: cannot parse \"%s\"\n", path, n, line);
            rc = NVML_ERROR_UNKNOWN;
        }
    }
    fclose(f);
    return rc;
}

static void read_consumed(void)
{
    memset(consumed_seq, 0, sizeof consumed_seq);
    FILE *f = fopen(consumed_path, "r");
    if (!f) return; /* nothing delivered yet */
    for (unsigned i = 0; i < MAX_GPUS && fscanf(f, "%llu", &consumed_seq[i]) == 1; i++) {}
    fclose(f);
}

static void write_consumed(void)
{
    FILE *f = fopen(consumed_path, "w");
    if (!f) {
        fprintf(stderr, "fake-nvml: cannot write %s\n", consumed_path);
        return;
    }
    for (unsigned i = 0; i < MAX_GPUS; i++) fprintf(f, "%llu%c", consumed_seq[i], i + 1 < MAX_GPUS ? ' ' : '\n');
    fclose(f);
}

/* Bring st up to date with the environment; called with mu held. */
static nvmlReturn_t load_state(void)
{
    const char *path = getenv("FAKE_NVML_STATE");
    if (!path || !*path) {
        const char *gpus = getenv("FAKE_NVML_GPUS");
        char *rest = NULL;
        unsigned count = gpus ? (unsigned)strtoul(gpus, &rest, 10) : 0;
        set_defaults(count, rest && *rest == 'x' ? rest + 1 : "NVIDIA H100 80GB HBM3");
        loaded_path[0] = 0;
        return NVML_SUCCESS;
    }
    struct stat sb;
    if (stat(path, &sb) != 0) {
        fprintf(stderr, "fake-nvml: cannot stat FAKE_NVML_STATE %s\n", path);
        return NVML_ERROR_UNKNOWN;
    }
    /* Writers replace the file by rename, so a new inode or mtime means new content. */
    if (strcmp(path, loaded_path) == 0 && sb.st_ino == loaded_stat.st_ino &&
        sb.st_size == loaded_stat.st_size && sb.st_mtim.tv_sec == loaded_stat.st_mtim.tv_sec &&
        sb.st_mtim.tv_nsec == loaded_stat.st_mtim.tv_nsec)
        return loaded_result;
    snprintf(loaded_path, sizeof loaded_path, "%s", path);
    snprintf(consumed_path, sizeof consumed_path, "%s.consumed", path);
    loaded_stat = sb;
    loaded_result = parse_state_file(path);
    read_consumed();
    return loaded_result;
}

/* Lock and check that NVML is initialised and the state loads. */
static nvmlReturn_t enter(void)
{
    pthread_mutex_lock(&mu);
    nvmlReturn_t rc = init_count > 0 ? load_state() : NVML_ERROR_UNINITIALIZED;
    if (rc != NVML_SUCCESS) pthread_mutex_unlock(&mu);
    return rc;
}

/* enter(), plus: the handle is one of ours and the field is not scripted to fail. */
static nvmlReturn_t enter_device(nvmlDevice_t dev, enum field f)
{
    nvmlReturn_t rc = enter();
    if (rc != NVML_SUCCESS) return rc;
    if (dev < st.gpus || dev >= st.gpus + st.gpu_count) rc = NVML_ERROR_INVALID_ARGUMENT;
    else rc = dev->fail[f];
    if (rc != NVML_SUCCESS) pthread_mutex_unlock(&mu);
    return rc;
}

static nvmlReturn_t leave(nvmlReturn_t rc)
{
    pthread_mutex_unlock(&mu);
    return rc;
}

static nvmlReturn_t copy_string(char *dst, unsigned length, const char *src)
{
    if (!dst) return NVML_ERROR_INVALID_ARGUMENT;
    if (strlen(src) + 1 > length) return NVML_ERROR_INSUFFICIENT_SIZE;
    memcpy(dst, src, strlen(src) + 1);
    return NVML_SUCCESS;
}

/* ---- NVML API ---------------------------------------------------------- */

nvmlReturn_t nvmlInit_v2(void)
{
    pthread_mutex_lock(&mu);
    nvmlReturn_t rc = load_state();
    if (rc == NVML_SUCCESS) rc = st.init_error;
    if (rc == NVML_SUCCESS) init_count++;
    return leave(rc);
}

nvmlReturn_t nvmlShutdown(void)
{
    pthread_mutex_lock(&mu);
    if (init_count == 0) return leave(NVML_ERROR_UNINITIALIZED);
    init_count--;
    return leave(NVML_SUCCESS);
}

const char *nvmlErrorString(nvmlReturn_t result)
{
    switch (result) {
    case 0: return "Success";
    case 1: return "Uninitialized";
    case 2: return "Invalid Argument";
    case 3: return "Not Supported";
    case 4: return "Insufficient Permissions";
    case 5: return "Already Initialized";
    case 6: return "Not Found";
    case 7: return "Insufficient Size";
    case 8: return "Insufficient External Power";
    case 9: return "Driver Not Loaded";
    case 10: return "Timeout";
    case 11: return "Interrupt request issue";
    case 12: return "NVML Shared Library Not Found";
    case 13: return "Function Not Found";
    case 14: return "Corrupted infoROM";
    case 15: return "GPU is lost";
    case 16: return "GPU requires restart";
    case 17: return "The operating system has blocked the request";
    default: return "Unknown Error";
    }
}

nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned length)
{
    nvmlReturn_t rc = enter();
    if (rc != NVML_SUCCESS) return rc;
    return leave(copy_string(version, length, st.driver_version));
}

nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *version)
{
    nvmlReturn_t rc = enter();
    if (rc != NVML_SUCCESS) return rc;
    *version = st.cuda_version;
    return leave(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned *count)
{
    nvmlReturn_t rc = enter();
    if (rc != NVML_SUCCESS) return rc;
    *count = st.gpu_count;
    return leave(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned index, nvmlDevice_t *device)
{
    nvmlReturn_t rc = enter();
    if (rc != NVML_SUCCESS) return rc;
    if (index >= st.gpu_count) return leave(NVML_ERROR_INVALID_ARGUMENT);
    *device = &st.gpus[index];
    return leave(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t dev, char *name, unsigned length)
{
    nvmlReturn_t rc = enter_device(dev, F_NAME);
    if (rc != NVML_SUCCESS) return rc;
    return leave(copy_string(name, length, dev->name));
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t dev, char *uuid, unsigned length)
{
    nvmlReturn_t rc = enter_device(dev, F_UUID);
    if (rc != NVML_SUCCESS) return rc;
    return leave(copy_string(uuid, length, dev->uuid));
}

typedef struct {
    char busIdLegacy[16];
    unsigned domain, bus, device, pciDeviceId, pciSubSystemId;
    char busId[32];
} nvmlPciInfo_t;

nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t dev, nvmlPciInfo_t *pci)
{
    nvmlReturn_t rc = enter_device(dev, F_PCI_BUS_ID);
    if (rc != NVML_SUCCESS) return rc;
    memset(pci, 0, sizeof *pci);
    snprintf(pci->busId, sizeof pci->busId, "%s", dev->pci_bus_id);
    snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "%s", dev->pci_bus_id + 4);
    sscanf(dev->pci_bus_id, "%x:%x:%x", &pci->domain, &pci->bus, &pci->device);
    pci->pciDeviceId = 0x233010de;
    return leave(NVML_SUCCESS);
}

typedef struct { unsigned long long total, free, used; } nvmlMemory_t;

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t dev, nvmlMemory_t *memory)
{
    nvmlReturn_t rc = enter_device(dev, F_MEMORY);
    if (rc != NVML_SUCCESS) return rc;
    memory->total = dev->memory_total;
    memory->used = dev->memory_used;
    memory->free = dev->memory_total > dev->memory_used ? dev->memory_total - dev->memory_used : 0;
    return leave(NVML_SUCCESS);
}

typedef struct { unsigned gpu, memory; } nvmlUtilization_t;

nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t dev, nvmlUtilization_t *util)
{
    nvmlReturn_t rc = enter_device(dev, F_UTILIZATION);
    if (rc != NVML_SUCCESS) return rc;
    util->gpu = dev->utilization_gpu;
    util->memory = dev->utilization_memory;
    return leave(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t dev, int sensor, unsigned *temp)
{
    nvmlReturn_t rc = enter_device(dev, F_TEMPERATURE);
    if (rc != NVML_SUCCESS) return rc;
    if (sensor != 0) return leave(NVML_ERROR_INVALID_ARGUMENT); /* only NVML_TEMPERATURE_GPU */
    *temp = dev->temperature;
    return leave(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t dev, unsigned *power)
{
    nvmlReturn_t rc = enter_device(dev, F_POWER_USAGE);
    if (rc != NVML_SUCCESS) return rc;
    *power = dev->power_usage;
    return leave(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t dev, unsigned *limit)
{
    nvmlReturn_t rc = enter_device(dev, F_POWER_LIMIT);
    if (rc != NVML_SUCCESS) return rc;
    *limit = dev->power_limit;
    return leave(NVML_SUCCESS);
}

/* nvmlClockType_t: 0 graphics, 1 SM, 2 memory, 3 video. */
nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t dev, int type, unsigned *clock)
{
    if (type < 0 || type > 2) return NVML_ERROR_INVALID_ARGUMENT;
    nvmlReturn_t rc = enter_device(dev, type == 2 ? F_CLOCK_MEM : F_CLOCK_SM);
    if (rc != NVML_SUCCESS) return rc;
    *clock = type == 2 ? dev->clock_mem : dev->clock_sm;
    return leave(NVML_SUCCESS);
}

/* errorType: 0 corrected, 1 uncorrected; counterType: 0 volatile, 1 aggregate. */
nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t dev, int errorType, int counterType,
                                         unsigned long long *count)
{
    nvmlReturn_t rc = enter_device(dev, F_ECC);
    if (rc != NVML_SUCCESS) return rc;
    if (errorType < 0 || errorType > 1 || counterType < 0 || counterType > 1)
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    if (counterType == 0)
        *count = errorType == 0 ? dev->ecc_corrected_volatile : dev->ecc_uncorrected_volatile;
    else
        *count = errorType == 0 ? dev->ecc_corrected_aggregate : dev->ecc_uncorrected_aggregate;
    return leave(NVML_SUCCESS);
}

/* cause: 0 multiple single-bit ECC errors, 1 a double-bit ECC error. Like the
 * real one, a *pageCount too small for the pages answers INSUFFICIENT_SIZE with
 * the count filled in, which is how callers ask for the count alone. */
nvmlReturn_t nvmlDeviceGetRetiredPages(nvmlDevice_t dev, int cause, unsigned *pageCount,
                                       unsigned long long *addresses)
{
    nvmlReturn_t rc = enter_device(dev, F_RETIRED_PAGES);
    if (rc != NVML_SUCCESS) return rc;
    if (cause < 0 || cause > 1 || !pageCount) return leave(NVML_ERROR_INVALID_ARGUMENT);
    unsigned pages = cause == 0 ? dev->retired_pages_sbe : dev->retired_pages_dbe;
    if (*pageCount < pages) {
        *pageCount = pages;
        return leave(NVML_ERROR_INSUFFICIENT_SIZE);
    }
    for (unsigned i = 0; addresses && i < pages; i++)
        addresses[i] = 0x100000ULL * (i + 1) + (unsigned long long)cause;
    *pageCount = pages;
    return leave(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetRemappedRows(nvmlDevice_t dev, unsigned *corrRows, unsigned *uncRows,
                                       unsigned *isPending, unsigned *failureOccurred)
{
    nvmlReturn_t rc = enter_device(dev, F_REMAPPED_ROWS);
    if (rc != NVML_SUCCESS) return rc;
    *corrRows = dev->remapped_corrected;
    *uncRows = dev->remapped_uncorrected;
    *isPending = dev->remapped_pending;
    *failureOccurred = dev->remapped_failure;
    return leave(NVML_SUCCESS);
}

/* nvmlFieldValue_t; the value union is 8 bytes (uiVal in its first 4). */
#define NVML_FI_DEV_GET_GPU_RECOVERY_ACTION 230
#define NVML_VALUE_TYPE_UNSIGNED_INT 1
typedef struct {
    unsigned fieldId, scopeId;
    long long timestamp, latencyUsec;
    int valueType;
    nvmlReturn_t nvmlReturn;
    union { double dVal; unsigned uiVal; unsigned long ulVal; unsigned long long ullVal; long long sllVal; int siVal; unsigned short usVal; } value;
} nvmlFieldValue_t;

/* Only the recovery-action field is known; every other field answers NOT_SUPPORTED in its slot. */
nvmlReturn_t nvmlDeviceGetFieldValues(nvmlDevice_t dev, int valuesCount, nvmlFieldValue_t *values)
{
    nvmlReturn_t rc = enter(), field_rc;
    if (rc != NVML_SUCCESS) return rc;
    if (dev < st.gpus || dev >= st.gpus + st.gpu_count || valuesCount < 0 || (valuesCount > 0 && !values))
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    field_rc = dev->fail[F_RECOVERY_ACTION] ? (nvmlReturn_t)dev->fail[F_RECOVERY_ACTION] : NVML_SUCCESS;
    for (int i = 0; i < valuesCount; i++) {
        values[i].timestamp = 0;
        values[i].latencyUsec = 0;
        if (values[i].fieldId != NVML_FI_DEV_GET_GPU_RECOVERY_ACTION) {
            values[i].nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
            continue;
        }
        values[i].nvmlReturn = field_rc;
        values[i].valueType = NVML_VALUE_TYPE_UNSIGNED_INT;
        values[i].value.ullVal = 0;
        values[i].value.uiVal = dev->recovery_action;
    }
    return leave(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t dev, unsigned long long *reasons)
{
    nvmlReturn_t rc = enter_device(dev, F_THROTTLE_REASONS);
    if (rc != NVML_SUCCESS) return rc;
    *reasons = dev->throttle_reasons;
    return leave(NVML_SUCCESS);
}

/* The older name of the same call; drivers before 535 only have this one. */
nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t dev, unsigned long long *reasons)
{
    return nvmlDeviceGetCurrentClocksEventReasons(dev, reasons);
}

/* ---- events ------------------------------------------------------------ */

/* Like NVML, every set gets every event it registered for: a set left waiting by a watch
 * that was abandoned must not take an event from the watch that replaced it. A set starts
 * after what was delivered before it was created (consumed_seq), so a new process or
 * watch does not see old events again. */
typedef struct nvmlEventSet_st {
    unsigned long long registered[MAX_GPUS]; /* event type mask per GPU index */
    unsigned long long consumed[MAX_GPUS];   /* highest event seq this set delivered, per GPU */
} *nvmlEventSet_t;

typedef struct {
    nvmlDevice_t device;
    unsigned long long eventType;
    unsigned long long eventData;
    unsigned gpuInstanceId;
    unsigned computeInstanceId;
} nvmlEventData_t;

nvmlReturn_t nvmlDeviceGetSupportedEventTypes(nvmlDevice_t dev, unsigned long long *types)
{
    nvmlReturn_t rc = enter_device(dev, F_EVENTS);
    if (rc != NVML_SUCCESS) return rc;
    *types = EVENT_XID | EVENT_ECC_SINGLE | EVENT_ECC_DOUBLE;
    return leave(NVML_SUCCESS);
}

nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t *set)
{
    nvmlReturn_t rc = enter();
    if (rc != NVML_SUCCESS) return rc;
    *set = calloc(1, sizeof **set);
    if (*set) memcpy((*set)->consumed, consumed_seq, sizeof consumed_seq);
    return leave(*set ? NVML_SUCCESS : NVML_ERROR_UNKNOWN);
}

nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t dev, unsigned long long types, nvmlEventSet_t set)
{
    nvmlReturn_t rc = enter_device(dev, F_EVENTS);
    if (rc != NVML_SUCCESS) return rc;
    if (!set) return leave(NVML_ERROR_INVALID_ARGUMENT);
    set->registered[dev - st.gpus] |= types;
    return leave(NVML_SUCCESS);
}

/* The oldest undelivered event this set registered for, or NULL; mu held. */
static const struct event *next_event(nvmlEventSet_t set)
{
    const struct event *best = NULL;
    for (unsigned i = 0; i < st.event_count; i++) {
        const struct event *e = &st.events[i];
        if (e->gpu >= st.gpu_count || e->seq <= set->consumed[e->gpu]) continue;
        if (!(set->registered[e->gpu] & e->type)) continue;
        if (!best || e->seq < best->seq) best = e;
    }
    return best;
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Polls the state file every 10 ms until an event is due or the timeout passes. */
nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t *data, unsigned timeoutms)
{
    if (!set || !data) return NVML_ERROR_INVALID_ARGUMENT;
    double deadline = now_ms() + timeoutms;
    for (;;) {
        nvmlReturn_t rc = enter();
        if (rc != NVML_SUCCESS) return rc;
        const struct event *e = next_event(set);
        if (e) {
            set->consumed[e->gpu] = e->seq;
            if (e->seq > consumed_seq[e->gpu]) {
                consumed_seq[e->gpu] = e->seq;
                write_consumed();
            }
            memset(data, 0, sizeof *data);
            data->device = &st.gpus[e->gpu];
            data->eventType = e->type;
            data->eventData = e->data;
            return leave(NVML_SUCCESS);
        }
        leave(NVML_SUCCESS);
        double left = deadline - now_ms();
        if (left <= 0) return NVML_ERROR_TIMEOUT;
        struct timespec nap = { 0, (long)((left < 10 ? left : 10) * 1e6) };
        nanosleep(&nap, NULL);
    }
}

nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set)
{
    free(set);
    return NVML_SUCCESS;
}
