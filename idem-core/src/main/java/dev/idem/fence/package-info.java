/** Fencing tokens: only-growing numbers that stop a worker whose lease ended from writing. */
package dev.idem.fence;
