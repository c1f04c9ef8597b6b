/** The CPU variants of llama.cpp's prebuilt binary whose back end a process has loaded (default: this one), from its memory map; [] where /proc is not. */
export function loadedCpuVariants(pid?: number | "self"): string[];
