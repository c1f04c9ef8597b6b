/**
 * Two pieces of Kubernetes' own behaviour, written from its sources and API
 * reference, for testing manifests where there is no cluster: how a
 * container's command, args and env values expand `$(VAR)`, and which action
 * a Job's podFailurePolicy takes for a failed pod.
 */

/**
 * Expands `$(NAME)` with `vars` as the kubelet does
 * (third_party/forked/golang/expansion): `$$` is a literal `$`; a name that
 * is not defined, and an unclosed `$(`, stay as written; `$` before anything
 * else stays.
 */
export function expandVars(input: string, vars: Readonly<Record<string, string>>): string {
  let out = "";
  let i = 0;
  while (i < input.length) {
    const c = input[i] as string;
    if (c !== "$" || i + 1 >= input.length) {
      out += c;
      i++;
      continue;
    }
    const next = input[i + 1] as string;
    if (next === "$") {
      out += "$";
      i += 2;
    } else if (next === "(") {
      const close = input.indexOf(")", i + 2);
      if (close === -1) {
        out += "$(";
        i += 2;
      } else {
        const name = input.slice(i + 2, close);
        out += Object.hasOwn(vars, name) ? vars[name] : `$(${name})`;
        i = close + 1;
      }
    } else {
      out += `$${next}`;
      i += 2;
    }
  }
  return out;
}

export interface PodFailureRule {
  action: "FailJob" | "FailIndex" | "Ignore" | "Count";
  onExitCodes?: { containerName?: string; operator: "In" | "NotIn"; values: number[] };
  onPodConditions?: { type: string; status?: string }[];
}

/** A failed pod as the Job controller sees it: each (init) container's exit code, and the pod's true conditions. */
export interface FailedPod {
  exitCodes: { container: string; code: number }[];
  conditions: string[];
}

/**
 * The action of the first rule that matches (the Job controller's order),
 * else the default, "Count". Exit code 0 is left out of every check; an exit
 * code rule matches when at least one remaining container's code is (In) or
 * is not (NotIn) among the values.
 */
export function podFailureAction(rules: readonly PodFailureRule[], pod: FailedPod): PodFailureRule["action"] {
  for (const rule of rules) {
    if (rule.onExitCodes) {
      const { containerName, operator, values } = rule.onExitCodes;
      const codes = pod.exitCodes.filter((c) => c.code !== 0 && (containerName === undefined || c.container === containerName)).map((c) => c.code);
      if (codes.some((code) => values.includes(code) === (operator === "In"))) return rule.action;
    } else if (rule.onPodConditions?.some((p) => (p.status ?? "True") === "True" && pod.conditions.includes(p.type))) {
      return rule.action;
    }
  }
  return "Count";
}
