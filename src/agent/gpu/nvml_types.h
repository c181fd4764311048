// The parts of NVML's C interface that Hangar uses, declared here so the agent builds without the
// CUDA toolkit and loads libnvidia-ml.so.1 at run time. Written from NVML's public API
// documentation; the struct layouts and constant values must match the driver's, so change them
// only against that documentation. Shared with the test double in tests/nvml_double/.
#pragma once

extern "C" {

// Every NVML call returns one of these (an int-sized C enum in nvml.h).
typedef int nvmlReturn_t;

typedef struct nvmlDevice_st* nvmlDevice_t;      // opaque
typedef struct nvmlEventSet_st* nvmlEventSet_t;  // opaque

// nvmlDeviceGetPciInfo_v2/_v3. The v1 call fills an older 52-byte layout whose first field is a
// 16-byte busId -- the position busIdLegacy holds here -- so this larger struct serves all three.
typedef struct {
  char busIdLegacy[16];
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pciDeviceId;
  unsigned int pciSubSystemId;
  char busId[32];
} nvmlPciInfo_t;

typedef struct {
  unsigned long long total;  // bytes
  unsigned long long free;
  unsigned long long used;
} nvmlMemory_t;

typedef struct {
  unsigned int gpu;     // percent of time a kernel ran over the last sample period
  unsigned int memory;  // percent of time device memory was read or written
} nvmlUtilization_t;

// nvmlEventSetWait_v2 fills all of it; the v1 call only the first three fields.
typedef struct {
  nvmlDevice_t device;
  unsigned long long eventType;
  unsigned long long eventData;  // the Xid for Xid events (999 when unknown)
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
} nvmlEventData_t;

typedef struct {
  unsigned long long referenceTime;  // microseconds since the epoch
  unsigned long long violationTime;  // nanoseconds the policy held the clocks down, since boot
} nvmlViolationTime_t;

// nvmlDeviceGetGpuInstancePossiblePlacements_v2: where an instance may go, in memory slices.
typedef struct {
  unsigned int start;  // first memory slice
  unsigned int size;   // memory slices
} nvmlGpuInstancePlacement_t;

// nvmlDeviceGetGpuInstanceProfileInfo (the unversioned struct).
typedef struct {
  unsigned int id;  // the driver's profile id (nvidia-smi mig -lgip)
  unsigned int isP2pSupported;
  unsigned int sliceCount;     // compute slices
  unsigned int instanceCount;  // how many fit on the empty GPU
  unsigned int multiprocessorCount;
  unsigned int copyEngineCount;
  unsigned int decoderCount;
  unsigned int encoderCount;
  unsigned int jpegCount;
  unsigned int ofaCount;
  unsigned long long memorySizeMB;
} nvmlGpuInstanceProfileInfo_t;

// MIG GPU and compute instances (opaque handles).
typedef struct nvmlGpuInstance_st* nvmlGpuInstance_t;
typedef struct nvmlComputeInstance_st* nvmlComputeInstance_t;

// nvmlGpuInstanceGetInfo.
typedef struct {
  nvmlDevice_t device;  // the parent GPU
  unsigned int id;      // unique on the GPU
  unsigned int profileId;
  nvmlGpuInstancePlacement_t placement;
} nvmlGpuInstanceInfo_t;

// nvmlGpuInstanceGetComputeInstanceProfileInfo (the unversioned struct).
typedef struct {
  unsigned int id;  // what nvmlGpuInstanceCreateComputeInstance takes
  unsigned int sliceCount;
  unsigned int instanceCount;
  unsigned int multiprocessorCount;
  unsigned int sharedCopyEngineCount;
  unsigned int sharedDecoderCount;
  unsigned int sharedEncoderCount;
  unsigned int sharedJpegCount;
  unsigned int sharedOfaCount;
} nvmlComputeInstanceProfileInfo_t;

// nvmlComputeInstanceGetInfo_v2 fills all of it; the v1 call the first four fields.
typedef struct {
  nvmlDevice_t device;
  nvmlGpuInstance_t gpuInstance;
  unsigned int id;  // unique in its GPU instance
  unsigned int profileId;
  nvmlGpuInstancePlacement_t placement;  // nvmlComputeInstancePlacement_t: compute slices
} nvmlComputeInstanceInfo_t;

// nvmlDeviceGetGpuFabricInfoV: the multi-node NVLink fabric a GPU belongs to. The layout of
// nvmlGpuFabricInfo_v3_t; a v2 caller sets version to v2 and NVML fills all but healthSummary.
// `state` is nvmlGpuFabricState_t (an unsigned char); `status` is read only once it is COMPLETED.
typedef struct {
  unsigned int version;
  unsigned char clusterUuid[16];
  nvmlReturn_t status;
  unsigned int cliqueId;
  unsigned char state;
  unsigned int healthMask;
  unsigned char healthSummary;
} nvmlGpuFabricInfoV_t;

// nvmlDeviceGetGpuFabricInfo (drivers before the versioned call): the unversioned struct.
typedef struct {
  unsigned char clusterUuid[16];
  nvmlReturn_t status;
  unsigned int cliqueId;
  unsigned char state;
} nvmlGpuFabricInfo_t;

}  // extern "C"

static_assert(sizeof(nvmlGpuFabricInfoV_t) == 40, "nvmlGpuFabricInfo_v3_t is 40 bytes");
static_assert(sizeof(nvmlGpuFabricInfo_t) == 28, "nvmlGpuFabricInfo_t is 28 bytes");

namespace hangar::agent::nvml {

// nvmlReturn_t values.
inline constexpr nvmlReturn_t kSuccess = 0;
inline constexpr nvmlReturn_t kErrorUninitialized = 1;
inline constexpr nvmlReturn_t kErrorInvalidArgument = 2;
inline constexpr nvmlReturn_t kErrorNotSupported = 3;
inline constexpr nvmlReturn_t kErrorNoPermission = 4;
inline constexpr nvmlReturn_t kErrorNotFound = 6;
inline constexpr nvmlReturn_t kErrorInsufficientSize = 7;
inline constexpr nvmlReturn_t kErrorDriverNotLoaded = 9;
inline constexpr nvmlReturn_t kErrorTimeout = 10;
inline constexpr nvmlReturn_t kErrorFunctionNotFound = 13;
inline constexpr nvmlReturn_t kErrorGpuIsLost = 15;
inline constexpr nvmlReturn_t kErrorResetRequired = 16;
inline constexpr nvmlReturn_t kErrorLibRmVersionMismatch = 18;
inline constexpr nvmlReturn_t kErrorInUse = 19;
inline constexpr nvmlReturn_t kErrorInsufficientResources = 23;
inline constexpr nvmlReturn_t kErrorArgumentVersionMismatch = 25;
inline constexpr nvmlReturn_t kErrorUnknown = 999;

// NVML_GPU_INSTANCE_PROFILE_*: the index nvmlDeviceGetGpuInstanceProfileInfo takes.
inline constexpr unsigned kGpuInstanceProfile1Slice = 0;
inline constexpr unsigned kGpuInstanceProfile2Slice = 1;
inline constexpr unsigned kGpuInstanceProfile3Slice = 2;
inline constexpr unsigned kGpuInstanceProfile4Slice = 3;
inline constexpr unsigned kGpuInstanceProfile7Slice = 4;
inline constexpr unsigned kGpuInstanceProfile1SliceRev2 = 9;  // one compute slice, double memory
inline constexpr unsigned kMigMaxPlacements = 8;              // one per memory slice at most
inline constexpr unsigned kMigMaxInstances = 8;  // GPU or compute instances of one profile

// NVML_COMPUTE_INSTANCE_PROFILE_*: 1, 2, 3, 4, 7, 8, 6 slices, then 1 slice (rev 1); and the
// engine profile NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED.
inline constexpr unsigned kComputeInstanceProfile1Slice = 0;
inline constexpr unsigned kComputeInstanceProfile2Slice = 1;
inline constexpr unsigned kComputeInstanceProfile3Slice = 2;
inline constexpr unsigned kComputeInstanceProfile4Slice = 3;
inline constexpr unsigned kComputeInstanceProfile7Slice = 4;
inline constexpr unsigned kComputeInstanceProfileCount = 8;
inline constexpr unsigned kComputeInstanceEngineProfileShared = 0;

// Buffer sizes NVML documents as large enough.
inline constexpr unsigned kUuidBufferSize = 80;
inline constexpr unsigned kNameBufferSize = 96;
inline constexpr unsigned kSerialBufferSize = 30;
inline constexpr unsigned kDriverVersionBufferSize = 80;

// nvmlTemperatureSensors_t, nvmlClockType_t, nvmlEccBitType_t/nvmlMemoryErrorType_t,
// nvmlEccCounterType_t, nvmlPageRetirementCause_t, nvmlPerfPolicyType_t.
inline constexpr int kTemperatureGpu = 0;
inline constexpr int kClockSm = 1;
inline constexpr int kClockMem = 2;
inline constexpr int kMemoryErrorCorrected = 0;
inline constexpr int kMemoryErrorUncorrected = 1;
inline constexpr int kVolatileEcc = 0;
inline constexpr int kRetiredMultipleSbe = 0;
inline constexpr int kRetiredDbe = 1;
inline constexpr int kPerfPolicyThermal = 1;

// nvmlEnableState_t, nvmlGpuP2PCapsIndex_t, nvmlGpuP2PStatus_t.
inline constexpr int kFeatureEnabled = 1;
inline constexpr int kP2pCapsIndexNvlink = 2;
inline constexpr int kP2pStatusOk = 0;

// nvmlGpuTopologyLevel_t: the closest common ancestor of two GPUs.
inline constexpr int kTopologyInternal = 0;
inline constexpr int kTopologySingle = 10;
inline constexpr int kTopologyMultiple = 20;
inline constexpr int kTopologyHostBridge = 30;
inline constexpr int kTopologyNode = 40;
inline constexpr int kTopologySystem = 50;

// nvmlNvLinkErrorCounter_t: replay, recovery, CRC flit, CRC data. NVML's link count ceiling.
inline constexpr int kNvLinkErrorCounters = 4;
inline constexpr unsigned kNvLinkMaxLinks = 36;

// nvmlIntNvLinkDeviceType_t: what is at the other end of an NVLink.
inline constexpr int kNvLinkDeviceTypeGpu = 0;
inline constexpr int kNvLinkDeviceTypeSwitch = 2;

// NVML_GPU_FABRIC_STATE_*, and the versions of nvmlGpuFabricInfo_v2/_v3 (NVML_STRUCT_VERSION:
// the struct's size | version << 24).
inline constexpr unsigned char kGpuFabricStateNotSupported = 0;
inline constexpr unsigned char kGpuFabricStateNotStarted = 1;
inline constexpr unsigned char kGpuFabricStateInProgress = 2;
inline constexpr unsigned char kGpuFabricStateCompleted = 3;
inline constexpr unsigned kGpuFabricInfoV2 = 36u | 2u << 24;
inline constexpr unsigned kGpuFabricInfoV3 = 40u | 3u << 24;

// Event type bits (nvmlEventType*).
inline constexpr unsigned long long kEventSingleBitEcc = 0x1;
inline constexpr unsigned long long kEventDoubleBitEcc = 0x2;
inline constexpr unsigned long long kEventXidCritical = 0x8;

// Clock event ("throttle") reason bits; the hardware ones mean the GPU is protecting itself.
inline constexpr unsigned long long kClocksEventHwSlowdown = 0x8;
inline constexpr unsigned long long kClocksEventHwThermalSlowdown = 0x40;
inline constexpr unsigned long long kClocksEventHwPowerBrake = 0x80;
inline constexpr unsigned long long kClocksEventHardwareMask =
    kClocksEventHwSlowdown | kClocksEventHwThermalSlowdown | kClocksEventHwPowerBrake;

}  // namespace hangar::agent::nvml
