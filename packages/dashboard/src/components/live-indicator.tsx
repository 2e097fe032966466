/** Where an open live stream stands, in a word and a colour. */
export type LiveState = 'connecting' | 'live' | 'interrupted' | 'ended';

export function LiveIndicator(props: { state: LiveState }) {
  const label = {
    connecting: 'connecting…',
    live: 'live',
    interrupted: 'interrupted',
    ended: 'stopped',
  }[props.state];
  return (
    <span class={`live live-${props.state}`} data-live-state={props.state}>
      <span aria-hidden="true">●</span> {label}
    </span>
  );
}
