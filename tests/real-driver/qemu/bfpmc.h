/*
 * The BlueField PMC model's SiP service, called from QEMU's SMC handling.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef HW_MISC_BFPMC_H
#define HW_MISC_BFPMC_H

/*
 * Answers a SiP call (x[0] a function in 0x82000000-0x82ffffff) in x[0..3], when a
 * bfpmc device is present; false otherwise (the caller answers as before).
 */
bool bfpmc_sip_call(uint64_t *x);

#endif
