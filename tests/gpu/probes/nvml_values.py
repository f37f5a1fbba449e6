#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Probe: a few numeric NVML values of GPU 0 through whichever
libnvidia-ml.so.1 the loader finds (run it once with the host's library and
once with lupine's), with the result code of each call. For the H200 run
where nvidia-smi through lupine showed 0 C, 0 MHz and 1 W."""
import pynvml as N

N.nvmlInit()
h = N.nvmlDeviceGetHandleByIndex(0)
calls = [
    ('temperature', lambda: N.nvmlDeviceGetTemperature(h, 0)),
    ('power_mW', lambda: N.nvmlDeviceGetPowerUsage(h)),
    ('power_limit_mW', lambda: N.nvmlDeviceGetPowerManagementLimit(h)),
    ('clock_sm', lambda: N.nvmlDeviceGetClockInfo(h, 1)),
    ('max_clock_sm', lambda: N.nvmlDeviceGetMaxClockInfo(h, 1)),
    ('pstate', lambda: N.nvmlDeviceGetPerformanceState(h)),
    ('persistence', lambda: N.nvmlDeviceGetPersistenceMode(h)),
    ('temp_shutdown', lambda: N.nvmlDeviceGetTemperatureThreshold(h, 0)),
    ('pcie_gen', lambda: N.nvmlDeviceGetCurrPcieLinkGeneration(h)),
    ('minor', lambda: N.nvmlDeviceGetMinorNumber(h)),
    ('mem_total', lambda: N.nvmlDeviceGetMemoryInfo(h).total),
]
for name, f in calls:
    try:
        print(f'{name} = {f()}')
    except N.NVMLError as e:
        print(f'{name}: error {e}')
