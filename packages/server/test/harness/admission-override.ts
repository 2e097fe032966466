/**
 * The fair-admission setting of a comparison run (RELIABILITY_ADMISSION_MAX_IN_FLIGHT, e.g.
 * 100000 for a run with the gate open), as env for a `flightlog serve` process, and its label.
 */
export function admissionOverride(): Record<string, string> {
  const value = process.env.RELIABILITY_ADMISSION_MAX_IN_FLIGHT;
  return value ? { ADMISSION_MAX_IN_FLIGHT: value } : {};
}

export const admissionLabel = () =>
  `admission ${process.env.RELIABILITY_ADMISSION_MAX_IN_FLIGHT || 'default'} in flight`;
