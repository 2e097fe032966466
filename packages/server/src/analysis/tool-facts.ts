import { toolOf, type ReadEvent } from './run-steps.js';

/*
 * The tools a run called (tool_call and mcp_call), with how often each failed: the table that
 * shows at a glance which tool was flaky or hammered.
 */

export interface ToolFact {
  tool: string;
  calls: number;
  failed: number;
  firstError: string | null;
}

export interface ToolFacts {
  /** The `limit` most called tools. */
  tools: ToolFact[];
  /** Tools beyond the listed ones. */
  moreTools: number;
}

export function collectTools(reads: ReadEvent[], limit: number): ToolFacts {
  const tools = new Map<string, ToolFact>();
  for (const read of reads) {
    const tool = toolOf(read);
    if (tool === null) continue;
    let fact = tools.get(tool);
    if (!fact) {
      fact = { tool, calls: 0, failed: 0, firstError: null };
      tools.set(tool, fact);
    }
    fact.calls++;
    if (read.event.status === 'error') {
      fact.failed++;
      fact.firstError ??= read.event.errorMessage ?? null;
    }
  }
  const sorted = [...tools.values()].sort(
    (a, b) => b.calls - a.calls || a.tool.localeCompare(b.tool),
  );
  return { tools: sorted.slice(0, limit), moreTools: Math.max(0, tools.size - limit) };
}
